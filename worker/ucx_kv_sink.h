// The prefill role's KvSink: writes each layer's K/V of a prompt into the decode worker's
// reserved pages with UCX RMA puts as the engine computes it, and at the end of every step
// waits until the puts have landed (engine/kv_sink.h). When the prompt is complete it
// computes the checksum the completion carries.
//
// Engine thread only, except result(), which the caller reads after the request ended.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "kvcache/kv_checksum.h"
#include "kvcache/kv_pool.h"
#include "kvcache/kv_ranges.h"
#include "kvcache/kv_sink.h"
#include "transport/registered_region.h"
#include "transport/transfer_ticket.h"
#include "transport/ucx_endpoint.h"
#include "worker/push_sink.h"

namespace baton::worker {

class UcxKvSink : public PushSink {
 public:
  // `endpoint`, `remote` and `local_region` must outlive the sink. `local_pool` is the
  // sender's page 0; `ticket` was validated against `layout`.
  UcxKvSink(transport::UcxEndpoint* endpoint, const transport::RemoteRegion* remote,
            const transport::RegisteredRegion* local_region, const void* local_pool,
            const kvcache::PageLayout& layout, const transport::TransferTicket& ticket,
            absl::Duration flush_timeout);

  void OnLayerWritten(int64_t layer, std::span<const int32_t> block_table, int64_t start,
                      int64_t count) override;
  absl::Status Drain(std::span<const int32_t> block_table, bool done) override;

  const KvPushResult& result() const override { return result_; }
  // The first put error, or the endpoint's failure; OK while all is well. Thread-safe
  // enough for a watcher: it reads the endpoint's health.
  absl::Status health() const override;
  bool detects_peer_failure() const override { return endpoint_->detects_peer_failure(); }

 private:
  using Clock = std::chrono::steady_clock;

  transport::UcxEndpoint* endpoint_;
  const transport::RemoteRegion* remote_;
  const transport::RegisteredRegion* local_region_;
  const std::byte* local_pool_;
  kvcache::PageLayout layout_;
  std::vector<int32_t> remote_pages_;
  int64_t first_block_;
  int64_t prompt_len_;
  absl::Duration flush_timeout_;
  kvcache::KvPushCursor cursor_;
  absl::Status error_;
  KvPushResult result_;
  bool started_ = false;
  Clock::time_point first_put_;
};

}  // namespace baton::worker
