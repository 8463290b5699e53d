#include "worker/rank_kv.h"

#include <utility>

#include "common/status.h"
#include "common/strings.h"
#include "kvcache/kv_checksum.h"
#include "kvcache/slice_copy.h"
#include "worker/transfer_ticket_proto.h"

namespace baton::worker {
namespace {

namespace pb = ::baton::internal::v1;

// How many pushes a rank holds at once: the leader's engine runs at most max_running
// sequences, each with one push; this bounds a confused leader.
constexpr size_t kMaxPushes = 1 << 16;

}  // namespace

transport::RankPool RankPoolOf(const transport::UcxWorker& ucx,
                               const transport::RegisteredRegion& region,
                               const kvcache::PageLayout& layout, int32_t rank) {
  transport::RankPool p;
  p.rank = rank;
  p.worker_address = ucx.address();
  p.rkey = region.packed_rkey();
  p.pool_base = region.base();
  p.pool_bytes = region.bytes();
  p.layout = layout;
  return p;
}

absl::Status VerifySliceSums(const void* pool, int64_t num_pages, const kvcache::PageLayout& local,
                             int32_t rank, const pb::VerifySlices& v) {
  const int64_t bs = local.block_size;
  if (v.prompt_tokens() < 1 || v.first_block() < 0 ||
      v.first_block() >= (v.prompt_tokens() - 1) / bs + 1 ||
      v.page_ids_size() != (v.prompt_tokens() - 1) / bs + 1 - v.first_block()) {
    return absl::InvalidArgumentError(StrCat("verify: ", v.page_ids_size(), " pages from block ",
                                             v.first_block(), " do not hold a prompt of ",
                                             v.prompt_tokens(), " tokens"));
  }
  for (int32_t id : v.page_ids()) {
    if (id < 0 || id >= num_pages) {
      return absl::InvalidArgumentError(
          StrCat("verify: page ", id, " is outside this rank's ", num_pages, " pages"));
    }
  }
  const std::vector<int32_t> pages(v.page_ids().begin(), v.page_ids().end());
  std::vector<kvcache::PageLayout> senders;
  for (const pb::PageLayout& l : v.sender_ranks()) {
    BATON_ASSIGN_OR_RETURN(kvcache::PageLayout sender, FromProto(l));
    senders.push_back(std::move(sender));
  }
  // Sane, of this model, and together filling this rank's pages once.
  BATON_RETURN_IF_ERROR(transport::CheckSenderSlices(senders, {local}));
  for (const pb::SliceChecksum& e : v.expected()) {
    if (e.receiver_rank() != rank) continue;
    if (e.sender_rank() < 0 || e.sender_rank() >= v.sender_ranks_size()) {
      return absl::InvalidArgumentError(StrCat("verify: sender rank ", e.sender_rank(),
                                               " is outside the sender's ", v.sender_ranks_size(),
                                               " ranks"));
    }
    const kvcache::PageLayout& sender = senders[static_cast<size_t>(e.sender_rank())];
    const kvcache::KvChecksum sum =
        kvcache::SliceKvChecksum(pool, sender, local, kvcache::SliceSide::kDestination, pages,
                                 v.first_block(), v.prompt_tokens());
    if (sum.hash != e.checksum() || sum.bytes != e.bytes()) {
      return absl::DataLossError(
          StrCat("the K/V that sender rank ", e.sender_rank(), " wrote into rank ", rank,
                 " hashes to ", sum.hash, " over ", sum.bytes, " bytes; the sender's is ",
                 e.checksum(), " over ", e.bytes(), ": the transfer lost or misplaced data"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<SliceTarget>> SliceTargetsOf(const transport::TransferTicket& ticket,
                                                        const kvcache::PageLayout& local,
                                                        RemotePools* pools) {
  std::vector<SliceTarget> targets;
  for (const transport::RankPool& r : ticket.ranks) {
    if (kvcache::SliceCopyRuns(local, r.layout).empty()) continue;
    BATON_ASSIGN_OR_RETURN(std::shared_ptr<RemotePool> pool,
                           pools->Get(r.worker_address, r.rkey, r.pool_base, r.pool_bytes));
    targets.push_back({r.rank, r.layout, std::move(pool)});
  }
  return targets;
}

UcxRankKv::UcxRankKv(transport::UcxWorker* ucx, const transport::RegisteredRegion* region,
                     kvcache::KvPool* pool, int32_t rank, absl::Duration flush_timeout)
    : ucx_(ucx),
      region_(region),
      pool_(pool),
      rank_(rank),
      flush_timeout_(flush_timeout),
      pools_(ucx, flush_timeout) {}

void UcxRankKv::OnLayerWritten(int64_t layer, std::span<const model::SequenceInput> batch) {
  for (const model::SequenceInput& s : batch) {
    if (s.kv_push == 0) continue;
    auto it = pushes_.find(s.kv_push);
    if (it == pushes_.end()) continue;  // dropped: its request is ending
    it->second->OnLayerWritten(layer, s.block_table, s.start_pos,
                               static_cast<int64_t>(s.tokens.size()));
  }
}

void UcxRankKv::AfterStep() {
  // Nothing posted may still read the pages once the step is over: the leader's next
  // step may reuse them. A failure stays with its push and fails it at its end.
  const absl::Time deadline = absl::Now() + flush_timeout_;
  for (auto& [id, push] : pushes_) (void)push->Flush(deadline);
}

absl::StatusOr<pb::RankKvReply> UcxRankKv::Begin(const pb::PushBegin& b) {
  if (b.push() == 0 || pushes_.count(b.push()) > 0 || pushes_.size() >= kMaxPushes) {
    return absl::InvalidArgumentError(StrCat("push ", b.push(),
                                             " is 0, already begun, or one too many (",
                                             pushes_.size(), " held, at most ", kMaxPushes, ")"));
  }
  const transport::TicketLimits limits;
  BATON_ASSIGN_OR_RETURN(transport::TransferTicket ticket, FromProto(b.ticket(), limits));
  const kvcache::PageLayout& local = pool_->layout();
  // That the group's ranks together fill each receiver rank was the leader's check.
  BATON_RETURN_IF_ERROR(transport::ValidateTicketRanks(ticket, limits, absl::Now()));
  for (const transport::RankPool& r : ticket.ranks) {
    BATON_RETURN_IF_ERROR(kvcache::CheckSliceCompatible(local, r.layout));
  }
  BATON_ASSIGN_OR_RETURN(std::vector<SliceTarget> targets, SliceTargetsOf(ticket, local, &pools_));
  const bool writer = rank_ < b.writers_size() && b.writers(rank_);
  pushes_[b.push()] = std::make_unique<SlicePush>(region_, pool_->block_data(0), local, rank_,
                                                  writer, std::move(targets), ticket);
  return pb::RankKvReply();
}

absl::StatusOr<pb::RankKvReply> UcxRankKv::End(const pb::PushEnd& e) {
  auto it = pushes_.find(e.push());
  if (it == pushes_.end()) {
    return absl::NotFoundError(StrCat("push ", e.push(), " was never begun on this rank"));
  }
  std::unique_ptr<SlicePush> push = std::move(it->second);
  pushes_.erase(it);
  BATON_RETURN_IF_ERROR(push->Flush(absl::Now() + flush_timeout_));
  const std::vector<int32_t> table(e.block_table().begin(), e.block_table().end());
  for (int32_t id : table) {
    if (id < 0 || id >= pool_->num_blocks()) {
      return absl::InvalidArgumentError(
          StrCat("PushEnd.block_table holds page ", id, "; this rank has ", pool_->num_blocks()));
    }
  }
  pb::RankKvReply reply;
  for (const transport::SliceSum& s : push->Checksums(table)) ToProto(s, reply.add_slices());
  reply.set_bytes_sent(push->bytes_sent());
  reply.set_puts(push->puts());
  return reply;
}

absl::StatusOr<std::string> UcxRankKv::Call(std::string_view request) {
  pb::RankKvCall call;
  if (!call.ParseFromArray(request.data(), static_cast<int>(request.size()))) {
    return absl::InvalidArgumentError("a rank call is not a RankKvCall");
  }
  absl::StatusOr<pb::RankKvReply> reply = pb::RankKvReply();
  switch (call.call_case()) {
    case pb::RankKvCall::kPool:
      ToProto(RankPoolOf(*ucx_, *region_, pool_->layout(), rank_), reply->mutable_pool());
      break;
    case pb::RankKvCall::kBegin:
      reply = Begin(call.begin());
      break;
    case pb::RankKvCall::kEnd:
      reply = End(call.end());
      break;
    case pb::RankKvCall::kDrop:
      pushes_.erase(call.drop().push());
      break;
    case pb::RankKvCall::kVerify: {
      absl::Status ok = VerifySliceSums(pool_->block_data(0), pool_->num_blocks(), pool_->layout(),
                                        rank_, call.verify());
      if (!ok.ok()) return ok;
      break;
    }
    default:
      return absl::InvalidArgumentError("a rank call names no request");
  }
  if (!reply.ok()) return reply.status();
  return reply->SerializeAsString();
}

}  // namespace baton::worker
