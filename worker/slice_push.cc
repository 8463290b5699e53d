#include "worker/slice_push.h"

#include <algorithm>
#include <utility>

#include "common/status.h"
#include "common/strings.h"
#include "kvcache/kv_checksum.h"
#include "kvcache/slice_copy.h"

namespace baton::worker {
namespace {

// Bytes of one layer's K and V in a page of `l`.
int64_t LayerBytes(const kvcache::PageLayout& l) {
  return l.layer_elements() * kvcache::DtypeBytes(l.dtype);
}

}  // namespace

SlicePush::SlicePush(const transport::RegisteredRegion* local_region, const void* local_pool,
                     const kvcache::PageLayout& local, int32_t local_rank, bool writer,
                     std::vector<SliceTarget> targets, const transport::TransferTicket& ticket)
    : local_region_(local_region),
      local_pool_(static_cast<const std::byte*>(local_pool)),
      local_(local),
      local_rank_(local_rank),
      writer_(writer),
      targets_(std::move(targets)),
      remote_pages_(ticket.page_ids),
      first_block_(ticket.first_block),
      prompt_len_(ticket.prompt_tokens) {
  for (const SliceTarget& t : targets_) {
    LayerRuns lr;
    lr.first = std::max(local_.first_layer, t.layout.first_layer);
    lr.end = std::min(local_.first_layer + local_.num_layers,
                      t.layout.first_layer + t.layout.num_layers);
    if (lr.first < lr.end) {
      lr.runs =
          kvcache::SliceCopyRuns(local_, t.layout, lr.first, lr.first + 1, 0, local_.block_size);
      const int64_t src0 = (lr.first - local_.first_layer) * LayerBytes(local_);
      const int64_t dst0 = (lr.first - t.layout.first_layer) * LayerBytes(t.layout);
      for (kvcache::CopyRun& r : lr.runs) {
        r.src_offset -= src0;
        r.dst_offset -= dst0;
      }
    }
    layer_runs_.push_back(std::move(lr));
  }
}

void SlicePush::PutBlock(std::span<const int32_t> block_table, int64_t block, int64_t l0,
                         int64_t l1, int64_t p0, int64_t p1) {
  const int64_t i = block - first_block_;
  if (i < 0 || i >= static_cast<int64_t>(remote_pages_.size()) ||
      block >= static_cast<int64_t>(block_table.size())) {
    error_ = absl::InternalError(StrCat("KV push: block ", block, " is outside the ticket"));
    return;
  }
  const std::byte* src_page = local_pool_ + block_table[block] * local_.page_bytes();
  for (size_t k = 0; k < targets_.size(); ++k) {
    const SliceTarget& t = targets_[k];
    const uint64_t dst_page =
        static_cast<uint64_t>(remote_pages_[i]) * static_cast<uint64_t>(t.layout.page_bytes());
    const LayerRuns& lr = layer_runs_[k];
    // One whole layer (what each layer of a full block sends): the cached runs, shifted.
    const bool whole_layer =
        l1 == l0 + 1 && p0 == 0 && p1 == local_.block_size && l0 >= lr.first && l0 < lr.end;
    std::vector<kvcache::CopyRun> computed;
    if (!whole_layer) computed = kvcache::SliceCopyRuns(local_, t.layout, l0, l1, p0, p1);
    const int64_t src_shift = whole_layer ? (l0 - local_.first_layer) * LayerBytes(local_) : 0;
    const int64_t dst_shift = whole_layer ? (l0 - t.layout.first_layer) * LayerBytes(t.layout) : 0;
    for (const kvcache::CopyRun& r : whole_layer ? lr.runs : computed) {
      error_ = t.pool->ep->Put(src_page + src_shift + r.src_offset, static_cast<size_t>(r.bytes),
                               *t.pool->region, dst_page + dst_shift + r.dst_offset, local_region_);
      if (!error_.ok()) return;
      bytes_sent_ += static_cast<uint64_t>(r.bytes);
      ++puts_;
    }
  }
}

void SlicePush::OnLayerWritten(int64_t layer, std::span<const int32_t> block_table, int64_t start,
                               int64_t count) {
  if (!error_.ok() || !writer_) return;
  const int64_t bs = local_.block_size;
  if (!started_) {
    started_ = true;
    // Positions before the first forward's start came from this worker's cache: whole
    // blocks, every layer this rank holds.
    for (int64_t b = first_block_; (b + 1) * bs <= start && error_.ok(); ++b) {
      PutBlock(block_table, b, 0, INT64_MAX, 0, std::min(prompt_len_ - b * bs, bs));
    }
  }
  const int64_t end = start + std::min(count, prompt_len_ - start);
  for (int64_t b = std::max(start / bs, first_block_); b * bs < end && error_.ok(); ++b) {
    const int64_t p0 = std::max(start, b * bs) - b * bs;
    const int64_t p1 = std::min(end, (b + 1) * bs) - b * bs;
    PutBlock(block_table, b, layer, layer + 1, p0, p1);
  }
}

absl::Status SlicePush::Flush(absl::Time deadline) {
  for (const SliceTarget& t : targets_) {
    if (!error_.ok()) break;
    error_ = t.pool->ep->Flush(deadline);
  }
  return error_;
}

absl::Status SlicePush::health() const {
  for (const SliceTarget& t : targets_) BATON_RETURN_IF_ERROR(t.pool->ep->health());
  return absl::OkStatus();
}

std::vector<transport::SliceSum> SlicePush::Checksums(std::span<const int32_t> block_table) const {
  std::vector<transport::SliceSum> out;
  if (!writer_) return out;
  const int64_t blocks = static_cast<int64_t>(remote_pages_.size());
  if (first_block_ + blocks > static_cast<int64_t>(block_table.size())) return out;
  const std::span<const int32_t> pages = block_table.subspan(first_block_, blocks);
  for (const SliceTarget& t : targets_) {
    const kvcache::KvChecksum sum =
        kvcache::SliceKvChecksum(local_pool_, local_, t.layout, kvcache::SliceSide::kSource, pages,
                                 first_block_, prompt_len_);
    out.push_back({local_rank_, t.rank, sum.hash, sum.bytes});
  }
  return out;
}

}  // namespace baton::worker
