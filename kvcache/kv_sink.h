// Where a prefill-role request's K/V goes besides its own pages: the engine calls a
// request's sink as each layer of each chunk lands in the pages, so that the sink can ship
// it (worker/ucx_kv_sink.h writes it into a decode worker's pages with UCX RMA puts)
// while the next layers compute. The engine knows nothing of the network.
//
// Calls come on the engine thread, in order: OnLayerWritten for every layer of every
// forward that computes some of the prompt, then Drain before the request's pages are
// released or reused (the request ended, failed, was cancelled or preempted).
#pragma once

#include <cstdint>
#include <span>

#include "absl/status/status.h"

namespace baton::kvcache {

class KvSink {
 public:
  virtual ~KvSink() = default;

  // Layer `layer` of a forward wrote the K/V of positions [start, start + count) into the
  // pages of `block_table` (positions before `start` were computed earlier or came from
  // the prefix cache). Must not block on the network: the forward waits for it.
  virtual void OnLayerWritten(int64_t layer, std::span<const int32_t> block_table, int64_t start,
                              int64_t count) = 0;

  // The pages of `block_table` are about to be released or reused: every write posted from
  // them must have left them. May block, but only until the sink's own deadline. `done` is
  // true when the prompt is complete (the request sampled its first token). An error here
  // fails the request.
  virtual absl::Status Drain(std::span<const int32_t> block_table, bool done) = 0;

  // A sink of a worker group's leader whose ranks each push their own slice (their layer
  // hooks see this id in the step's plan, engine/parallel/rank_kv.h): then nonzero, and
  // OnLayerWritten is the leader's own rank's part only if the sink says so.
  virtual uint64_t group_push() const { return 0; }
};

}  // namespace baton::kvcache
