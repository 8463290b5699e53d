#include "worker/ucx_kv_sink.h"

#include "common/strings.h"

namespace baton::worker {

UcxKvSink::UcxKvSink(transport::UcxEndpoint* endpoint, const transport::RemoteRegion* remote,
                     const transport::RegisteredRegion* local_region, const void* local_pool,
                     const kvcache::PageLayout& layout, const transport::TransferTicket& ticket,
                     absl::Duration flush_timeout)
    : endpoint_(endpoint),
      remote_(remote),
      local_region_(local_region),
      local_pool_(static_cast<const std::byte*>(local_pool)),
      layout_(layout),
      remote_pages_(ticket.page_ids),
      first_block_(ticket.first_block),
      prompt_len_(ticket.prompt_tokens),
      flush_timeout_(flush_timeout),
      cursor_(layout, ticket.first_block, ticket.prompt_tokens) {}

void UcxKvSink::OnLayerWritten(int64_t layer, std::span<const int32_t> block_table, int64_t start,
                               int64_t count) {
  if (!error_.ok()) return;  // the request fails at the step's Drain
  const int64_t page_bytes = layout_.page_bytes();
  cursor_.OnLayerWritten(layer, start, count, [&](const kvcache::KvRange& r) {
    if (!error_.ok()) return;
    const int64_t i = r.block - first_block_;
    if (i < 0 || i >= static_cast<int64_t>(remote_pages_.size()) ||
        r.block >= static_cast<int64_t>(block_table.size())) {
      // The cursor only yields prompt blocks the ticket covers; anything else is a bug.
      error_ = absl::InternalError(StrCat("KV push: block ", r.block, " is outside the ticket"));
      return;
    }
    if (!started_) {
      started_ = true;
      first_put_ = Clock::now();
    }
    error_ = endpoint_->Put(
        local_pool_ + block_table[r.block] * page_bytes + r.offset, static_cast<size_t>(r.bytes),
        *remote_, static_cast<uint64_t>(remote_pages_[i]) * page_bytes + r.offset, local_region_);
    result_.bytes_sent += static_cast<uint64_t>(r.bytes);
    ++result_.puts;
  });
}

absl::Status UcxKvSink::Drain(std::span<const int32_t> block_table, bool done) {
  const Clock::time_point entered = Clock::now();
  if (error_.ok()) error_ = endpoint_->Flush(absl::Now() + flush_timeout_);
  if (!error_.ok()) {
    return absl::UnavailableError(
        StrCat("the KV transfer to the decode worker failed: ", error_.message()));
  }
  const Clock::time_point flushed = Clock::now();
  if (started_) {
    result_.transfer_seconds = std::chrono::duration<double>(flushed - first_put_).count();
  }
  // Every drain holds up the engine: together they are what the transfer adds to the
  // prefill, the part that did not overlap with compute.
  result_.exposed_seconds += std::chrono::duration<double>(flushed - entered).count();
  if (done) {
    result_.complete = true;
    const int64_t blocks =
        (prompt_len_ + layout_.block_size - 1) / layout_.block_size - first_block_;
    if (blocks > 0) {
      result_.checksum =
          kvcache::PromptKvChecksum(local_pool_, layout_, block_table.subspan(first_block_, blocks),
                                    first_block_, prompt_len_);
    }
  }
  return absl::OkStatus();
}

absl::Status UcxKvSink::health() const { return endpoint_->health(); }

}  // namespace baton::worker
