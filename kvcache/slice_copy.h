// Where one rank's K/V goes in another rank's page when the two hold different slices of
// the model (kvcache/page_layout.h): a prefill group with tp=2 writing to a decode worker
// with tp=1, or the reverse, or pipeline stages of different cuts. For each layer both
// pages hold, each head's K, then its V, of the positions asked for is contiguous in both
// pages; runs that continue each other in both pages are merged, so the whole page of a
// head range is one run per layer (one run per page for equal slices), and only partial
// pages cost two runs per head.
//
// This is what lets a transfer write each head range straight to its place, with no
// gather and no conversion step on either side.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "kvcache/page_layout.h"

namespace baton::kvcache {

struct CopyRun {
  int64_t src_offset = 0;  // bytes from the start of the source page
  int64_t dst_offset = 0;  // bytes from the start of the destination page
  int64_t bytes = 0;

  bool operator==(const CopyRun&) const = default;
};

// The two pages are of the same model and can exchange K/V: same head_dim, block_size
// and dtype (FailedPrecondition naming the field and both values otherwise).
absl::Status CheckSliceCompatible(const PageLayout& src, const PageLayout& dst);

// The runs that copy the K/V of model layers [layer_begin, layer_end) and positions
// [pos_begin, pos_end) of a page from `src`'s layout into `dst`'s, limited to what both
// hold. Empty when they share no layer or no head. Preconditions: CheckSliceCompatible,
// 0 <= pos_begin <= pos_end <= block_size.
std::vector<CopyRun> SliceCopyRuns(const PageLayout& src, const PageLayout& dst,
                                   int64_t layer_begin, int64_t layer_end, int64_t pos_begin,
                                   int64_t pos_end);

// The whole page: every layer and position both hold.
inline std::vector<CopyRun> SliceCopyRuns(const PageLayout& src, const PageLayout& dst) {
  return SliceCopyRuns(src, dst, 0, INT64_MAX, 0, src.block_size);
}

// Which of a group's ranks write their slice to a receiver: all but the replicas. When TP
// exceeds the model's KV heads, several ranks hold the same heads; only the first of them
// (in world-rank order) sends, so that every byte of a receiver's page has one writer.
std::vector<bool> SliceWriters(std::span<const PageLayout> senders);

// That the writers among `senders` fill every byte of a `receiver` page exactly once:
// every layer and KV head it holds is held by exactly one writer (FailedPrecondition
// naming the first layer and head that is not). Preconditions: each sender passed
// CheckSliceCompatible with the receiver.
absl::Status CheckSliceCover(std::span<const PageLayout> senders, const PageLayout& receiver);

}  // namespace baton::kvcache
