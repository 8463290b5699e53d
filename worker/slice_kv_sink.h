// The prefill side's sinks of sliced transfers (docs/parallel.md, "KV transfers with
// groups"):
//   SliceKvSink  a one-rank worker pushing into a receiver of other slices (a decode
//                group, or another layout): one SlicePush, fed by the engine's layer hook.
//   GroupKvSink  the leader of a prefill group: every rank pushes its own slice from its
//                own layer hook (worker/rank_kv.h), under the push id the step plans
//                carry; this sink only ends the push on every rank and gathers their
//                checksums.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "absl/time/time.h"
#include "engine/parallel/worker_group.h"
#include "worker/push_sink.h"
#include "worker/slice_push.h"

namespace baton::worker {

class SliceKvSink : public PushSink {
 public:
  SliceKvSink(std::unique_ptr<SlicePush> push, absl::Duration flush_timeout)
      : push_(std::move(push)), flush_timeout_(flush_timeout) {}

  void OnLayerWritten(int64_t layer, std::span<const int32_t> block_table, int64_t start,
                      int64_t count) override;
  absl::Status Drain(std::span<const int32_t> block_table, bool done) override;
  const KvPushResult& result() const override { return result_; }
  absl::Status health() const override { return push_->health(); }

 private:
  using Clock = std::chrono::steady_clock;
  std::unique_ptr<SlicePush> push_;
  absl::Duration flush_timeout_;
  KvPushResult result_;
  bool started_ = false;
  Clock::time_point first_put_;
};

class GroupKvSink : public PushSink {
 public:
  // The push was begun on every rank of `group` (which must outlive the sink) under `push`.
  GroupKvSink(engine::GroupBackend* group, uint64_t push) : group_(group), push_(push) {}
  ~GroupKvSink() override;  // drops the push on every rank if it did not end

  uint64_t group_push() const override { return push_; }
  void OnLayerWritten(int64_t, std::span<const int32_t>, int64_t, int64_t) override {}
  absl::Status Drain(std::span<const int32_t> block_table, bool done) override;
  const KvPushResult& result() const override { return result_; }
  absl::Status health() const override { return group_->health(); }

 private:
  using Clock = std::chrono::steady_clock;
  engine::GroupBackend* group_;
  uint64_t push_;
  bool ended_ = false;
  KvPushResult result_;
  Clock::time_point begun_ = Clock::now();
};

}  // namespace baton::worker
