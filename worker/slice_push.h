// One rank's push of one prompt's K/V into the ranks of a receiver that hold other slices
// (docs/parallel.md, "KV transfers with groups"): as each layer lands in this rank's
// pages, the runs of kvcache::SliceCopyRuns go straight to their places in every
// receiver rank that holds some of them, one UCX RMA put per run. No gather, no
// conversion on either side. A replica rank (kvcache::SliceWriters) sends nothing.
//
// One thread at a time (the rank's step thread).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "kvcache/page_layout.h"
#include "kvcache/slice_copy.h"
#include "transport/registered_region.h"
#include "transport/transfer_ticket.h"
#include "worker/remote_pools.h"

namespace baton::worker {

struct SliceTarget {
  int32_t rank = 0;  // the receiver's rank
  kvcache::PageLayout layout;
  std::shared_ptr<RemotePool> pool;
};

// The runs of one whole layer of a page, both pages' layer starts at 0: the same for every
// layer the two slices share (a layer-wise push's common case), so computed once.
struct LayerRuns {
  int64_t first = 0, end = 0;  // the model layers both hold
  std::vector<kvcache::CopyRun> runs;
};

class SlicePush {
 public:
  // `local_region` registers this rank's pool, whose page 0 is `local_pool`, of `local`
  // layout; `local_rank` is this rank's in its group. The targets are the receiver ranks
  // this rank shares K/V with; `ticket` was checked by ValidateSlicedTicket.
  SlicePush(const transport::RegisteredRegion* local_region, const void* local_pool,
            const kvcache::PageLayout& local, int32_t local_rank, bool writer,
            std::vector<SliceTarget> targets, const transport::TransferTicket& ticket);

  // Model layer `layer` wrote positions [start, start + count) into `block_table`'s pages.
  // Before the first call's layer: the blocks this worker's prefix cache served.
  void OnLayerWritten(int64_t layer, std::span<const int32_t> block_table, int64_t start,
                      int64_t count);
  // Waits until every put posted so far has landed; the first error sticks.
  absl::Status Flush(absl::Time deadline);
  // Per target, the checksum of what this rank wrote (kvcache::SliceKvChecksum).
  std::vector<transport::SliceSum> Checksums(std::span<const int32_t> block_table) const;

  absl::Status error() const { return error_; }
  // The endpoints' health: readable from another thread while the push runs.
  absl::Status health() const;
  uint64_t bytes_sent() const { return bytes_sent_; }
  int64_t puts() const { return puts_; }
  bool started() const { return started_; }

 private:
  // Layers [l0, l1) and positions [p0, p1) of block `block` to every target.
  void PutBlock(std::span<const int32_t> block_table, int64_t block, int64_t l0, int64_t l1,
                int64_t p0, int64_t p1);

  const transport::RegisteredRegion* local_region_;
  const std::byte* local_pool_;
  kvcache::PageLayout local_;
  int32_t local_rank_;
  bool writer_;
  std::vector<SliceTarget> targets_;
  std::vector<LayerRuns> layer_runs_;  // per target
  std::vector<int32_t> remote_pages_;
  int64_t first_block_;
  int64_t prompt_len_;
  absl::Status error_;
  uint64_t bytes_sent_ = 0;
  int64_t puts_ = 0;
  bool started_ = false;
};

}  // namespace baton::worker
