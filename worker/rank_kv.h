// A group rank's part of KV transfers over UCX (engine/parallel/rank_kv.h): what the
// leader asks each rank between steps (proto/baton/internal/v1/rank_kv.proto), and the
// pushes each rank of a prefill group runs from its own layer hook.
//   pool    a decode rank's pool as senders reach it (a RankPool of the ticket)
//   begin   a prefill rank starts pushing its slice of a prompt (a SlicePush)
//   end     it waits for its puts and returns its checksums
//   drop    it forgets a push that failed
//   verify  a decode rank recomputes what the sender's ranks wrote into its pages
// Everything the leader sends is bounded again here: a rank trusts no message blindly.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "baton/internal/v1/rank_kv.pb.h"
#include "engine/parallel/rank_kv.h"
#include "kvcache/kv_pool.h"
#include "transport/registered_region.h"
#include "transport/transfer_ticket.h"
#include "transport/ucx_worker.h"
#include "worker/remote_pools.h"
#include "worker/slice_push.h"

namespace baton::worker {

// This rank's pool as a ticket names it.
transport::RankPool RankPoolOf(const transport::UcxWorker& ucx,
                               const transport::RegisteredRegion& region,
                               const kvcache::PageLayout& layout, int32_t rank);

// The receiver's check of one rank's pages after a sliced transfer: `expected` are the
// completion's entries for this rank (`rank`); each is recomputed over `pool` (page 0 of
// `num_pages` pages of `local` layout) from the sender rank's layout. DataLoss when one
// differs, InvalidArgument when a page, rank or count is out of bounds.
absl::Status VerifySliceSums(const void* pool, int64_t num_pages, const kvcache::PageLayout& local,
                             int32_t rank, const baton::internal::v1::VerifySlices& verify);

// The pushes a prefill rank begins, by id, over one RemotePools; or a pool to report.
class UcxRankKv : public engine::RankKv {
 public:
  // All must outlive this. `rank` is this rank's world rank.
  UcxRankKv(transport::UcxWorker* ucx, const transport::RegisteredRegion* region,
            kvcache::KvPool* pool, int32_t rank, absl::Duration flush_timeout);

  void OnLayerWritten(int64_t layer, std::span<const model::SequenceInput> batch) override;
  void AfterStep() override;
  absl::StatusOr<std::string> Call(std::string_view request) override;

 private:
  absl::StatusOr<baton::internal::v1::RankKvReply> Begin(const baton::internal::v1::PushBegin& b);
  absl::StatusOr<baton::internal::v1::RankKvReply> End(const baton::internal::v1::PushEnd& e);

  transport::UcxWorker* ucx_;
  const transport::RegisteredRegion* region_;
  kvcache::KvPool* pool_;
  int32_t rank_;
  absl::Duration flush_timeout_;
  RemotePools pools_;
  std::map<uint64_t, std::unique_ptr<SlicePush>> pushes_;
};

// The targets among a ticket's ranks that share K/V with `local`: their pools reached
// through `pools`.
absl::StatusOr<std::vector<SliceTarget>> SliceTargetsOf(const transport::TransferTicket& ticket,
                                                        const kvcache::PageLayout& local,
                                                        RemotePools* pools);

}  // namespace baton::worker
