// What each rank of a worker group does for KV transfers besides its forward
// (docs/parallel.md, "KV transfers with groups"): a prefill group's ranks each push their
// own slice of a prompt's K/V into the decode side's ranks as their layers compute it; a
// decode group's ranks each hold their slice of the reserved pages and check what
// arrived. The engine knows nothing of the network: the worker layer implements this
// (worker/rank_kv.h) and the group calls it.
//
// Calls come on the rank's step thread: OnLayerWritten during a forward, AfterStep at its
// end, Call between steps (the leader's GroupBackend::CallRanks).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "kvcache/kv_pool.h"
#include "model/forward_batch.h"

namespace baton::engine {

class RankKv {
 public:
  virtual ~RankKv() = default;

  // Model layer `layer` of this rank's stage wrote the K/V of the batch into this rank's
  // pages; sequences with a nonzero kv_push feed a push. Must not block on the network.
  virtual void OnLayerWritten(int64_t layer, std::span<const model::SequenceInput> batch) = 0;

  // The step that fed pushes ended on this rank: nothing it posted may still be reading
  // its pages. A failure is kept and reported by the push's end (a Call).
  virtual void AfterStep() = 0;

  // One request of the leader; the reply travels back to it. An error is the call's, not
  // the group's: the group keeps serving.
  virtual absl::StatusOr<std::string> Call(std::string_view request) = 0;
};

// How a rank takes part in KV transfers: where its pool's memory comes from (null: the
// pool maps its own), and its RankKv once the pool exists (null: none; calls are then
// refused with Unimplemented).
struct RankKvSetup {
  std::function<absl::StatusOr<void*>(size_t bytes)> pool_memory;
  std::function<absl::StatusOr<std::unique_ptr<RankKv>>(kvcache::KvPool* pool)> make;
};

}  // namespace baton::engine
