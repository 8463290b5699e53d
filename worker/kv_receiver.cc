#include "worker/kv_receiver.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "baton/internal/v1/rank_kv.pb.h"

#include "common/status.h"
#include "common/strings.h"
#include "kvcache/kv_checksum.h"
#include "service/grpc_status.h"
#include "worker/rank_kv.h"
#include "worker/transfer_ticket_proto.h"
#include "worker/worker_service.h"

namespace baton::worker {

using service::ToGrpcStatus;
namespace {

namespace pb = ::baton::internal::v1;

transport::LeaseLimits LimitsOf(const KvReceiverOptions& options, int64_t pool_pages) {
  auto share = [&](int64_t whole) {
    return std::max<int64_t>(
        1, static_cast<int64_t>(static_cast<double>(whole) * options.max_share_per_caller));
  };
  return {.max_leases = options.max_leases,
          .max_leases_per_caller = share(options.max_leases),
          .max_pages_per_caller = share(pool_pages)};
}

}  // namespace

class KvReceiver::Service final : public pb::KvTransfer::Service {
 public:
  explicit Service(KvReceiver* r) : r_(r) {}

  grpc::Status Reserve(grpc::ServerContext* ctx, const pb::ReserveRequest* req,
                       pb::TransferTicket* out) override {
    if (grpc::Status auth = r_->options_.auth->Check(*ctx); !auth.ok()) return auth;
    absl::StatusOr<pb::TransferTicket> ticket = r_->Reserve(*req, service::CallerOf(*ctx));
    if (!ticket.ok()) {
      if (r_->metrics_ != nullptr) r_->metrics_->CountFailed("receiver", "reserve");
      return ToGrpcStatus(ticket.status());
    }
    *out = *std::move(ticket);
    return grpc::Status::OK;
  }

  grpc::Status Complete(grpc::ServerContext* ctx, const pb::TransferComplete* req,
                        pb::CompleteResponse*) override {
    if (grpc::Status auth = r_->options_.auth->Check(*ctx); !auth.ok()) return auth;
    return ToGrpcStatus(r_->Complete(*req));
  }

  grpc::Status Release(grpc::ServerContext* ctx, const pb::ReleaseRequest* req,
                       pb::ReleaseResponse*) override {
    if (grpc::Status auth = r_->options_.auth->Check(*ctx); !auth.ok()) return auth;
    r_->Release(req->request_id());
    return grpc::Status::OK;
  }

  grpc::Status KeepAlive(grpc::ServerContext* ctx, const pb::KeepAliveRequest* req,
                         pb::KeepAliveResponse* out) override {
    if (grpc::Status auth = r_->options_.auth->Check(*ctx); !auth.ok()) return auth;
    absl::StatusOr<absl::Time> deadline = r_->KeepAlive(*req);
    if (!deadline.ok()) return ToGrpcStatus(deadline.status());
    out->set_lease_deadline_unix_ms(absl::ToUnixMillis(*deadline));
    return grpc::Status::OK;
  }

 private:
  KvReceiver* r_;
};

absl::StatusOr<std::unique_ptr<KvReceiver>> KvReceiver::Create(
    engine::Engine* engine, transport::UcxWorker* ucx, const transport::RegisteredRegion* pool,
    const KvReceiverOptions& options, WorkerMetrics* metrics, engine::GroupBackend* group) {
  std::unique_ptr<KvReceiver> r(new KvReceiver(engine, ucx, pool, options, metrics, group));
  BATON_RETURN_IF_ERROR(r->LoadRankPools());
  r->watcher_ = std::thread([raw = r.get()] { raw->WatchLeases(); });
  return r;
}

KvReceiver::KvReceiver(engine::Engine* engine, transport::UcxWorker* ucx,
                       const transport::RegisteredRegion* pool, const KvReceiverOptions& options,
                       WorkerMetrics* metrics, engine::GroupBackend* group)
    : engine_(engine),
      ucx_(ucx),
      options_(options),
      metrics_(metrics),
      layout_(engine->kv_layout()),
      region_(pool),
      group_(group),
      leases_(LimitsOf(options, engine->Stats().pages_total)),
      service_(std::make_unique<Service>(this)) {}

absl::Status KvReceiver::LoadRankPools() {
  if (group_ == nullptr) {
    rank_pools_ = {RankPoolOf(*ucx_, *region_, layout_, 0)};
  } else {
    pb::RankKvCall call;
    call.mutable_pool();
    BATON_ASSIGN_OR_RETURN(auto replies, group_->CallRanks(call.SerializeAsString()));
    for (size_t r = 0; r < replies.size(); ++r) {
      BATON_RETURN_IF_ERROR(replies[r].status());
      pb::RankKvReply reply;
      if (!reply.ParseFromString(*replies[r])) {
        return absl::DataLossError(StrCat("group rank ", r, "'s pool answer is malformed"));
      }
      BATON_ASSIGN_OR_RETURN(transport::RankPool pool,
                             FromProto(reply.pool(), transport::TicketLimits()));
      if (pool.rank != static_cast<int32_t>(r)) {
        return absl::DataLossError(StrCat("group rank ", r, " says it is rank ", pool.rank));
      }
      rank_pools_.push_back(std::move(pool));
    }
  }
  for (const transport::RankPool& p : rank_pools_) rank_layouts_.push_back(p.layout);
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> KvReceiver::VerifySlices(const Transfer& transfer,
                                                  const transport::TransferComplete& c) {
  const std::vector<std::pair<int32_t, int32_t>> expected =
      transport::ExpectedSlices(transfer.senders, rank_layouts_);
  if (c.slices.size() != expected.size()) {
    return absl::DataLossError(StrCat("complete.slices has ", c.slices.size(),
                                      " entries; the sender's and this worker's ranks share K/V "
                                      "in ",
                                      expected.size(), " pairs"));
  }
  uint64_t bytes = 0;
  pb::RankKvCall call;
  pb::VerifySlices* v = call.mutable_verify();
  const transport::TransferTicket& t = transfer.ticket;
  v->mutable_page_ids()->Add(t.page_ids.begin(), t.page_ids.end());
  v->set_first_block(t.first_block);
  v->set_prompt_tokens(t.prompt_tokens);
  for (const kvcache::PageLayout& l : transfer.senders) ToProto(l, v->add_sender_ranks());
  for (size_t i = 0; i < expected.size(); ++i) {
    const transport::SliceSum& s = c.slices[i];
    if (s.sender_rank != expected[i].first || s.receiver_rank != expected[i].second) {
      return absl::DataLossError(StrCat("complete.slices[", i, "] is sender rank ", s.sender_rank,
                                        " to rank ", s.receiver_rank, "; expected ",
                                        expected[i].first, " to ", expected[i].second));
    }
    ToProto(s, v->add_expected());
    bytes += s.bytes;
  }
  if (group_ == nullptr) {
    const int64_t pages = engine_->kv_pool_bytes() / layout_.page_bytes();
    BATON_RETURN_IF_ERROR(VerifySliceSums(engine_->kv_pool_data(), pages, layout_, 0, *v));
    return bytes;
  }
  BATON_ASSIGN_OR_RETURN(auto replies, group_->CallRanks(call.SerializeAsString()));
  for (const absl::StatusOr<std::string>& r : replies) BATON_RETURN_IF_ERROR(r.status());
  return bytes;
}

KvReceiver::~KvReceiver() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (watcher_.joinable()) watcher_.join();
  for (transport::Lease& l : leases_.Expire(absl::InfiniteFuture())) {
    Drop(l.request_id, absl::UnavailableError("the decode worker is shutting down"));
  }
  std::map<std::string, Waiter, std::less<>> waiters;
  {
    std::lock_guard<std::mutex> lock(mu_);
    waiters.swap(waiters_);
  }
  for (auto& [id, w] : waiters) {
    w.done(absl::UnavailableError("the decode worker is shutting down"));
  }
}

grpc::Service* KvReceiver::service() { return service_.get(); }

void KvReceiver::UpdateGauges() {
  if (metrics_ != nullptr) metrics_->SetLeases(leases_.leases_held(), leases_.pages_reserved());
}

void KvReceiver::WatchLeases() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    absl::Time next = std::min(leases_.NextDeadline().value_or(absl::InfiniteFuture()),
                               absl::Now() + absl::Seconds(1));
    for (const auto& [id, w] : waiters_) next = std::min(next, w.deadline);
    wake_.wait_until(lock, absl::ToChronoTime(next));
    if (stop_) break;
    lock.unlock();
    for (transport::Lease& l : leases_.Expire(absl::Now())) {
      Drop(l.request_id,
           absl::DeadlineExceededError("the KV transfer's lease ended before it completed"));
      if (metrics_ != nullptr) metrics_->CountExpired();
    }
    ExpireWaiters(absl::Now());
    UpdateGauges();
    lock.lock();
  }
}

void KvReceiver::Drop(const std::string& transfer_id, const absl::Status& why) {
  (void)engine_->ReleaseKv(transfer_id);  // NotFound: a claimed request owns the pages now
  {
    std::lock_guard<std::mutex> lock(mu_);
    transfers_.erase(transfer_id);
  }
  Settle(transfer_id, why);
}

void KvReceiver::Settle(const std::string& transfer_id, const absl::Status& status) {
  std::function<void(absl::Status)> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = waiters_.find(transfer_id);
    if (it == waiters_.end()) return;
    done = std::move(it->second.done);
    waiters_.erase(it);
  }
  done(status);
}

void KvReceiver::ExpireWaiters(absl::Time now) {
  std::vector<Waiter> expired;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      if (it->second.deadline <= now) {
        expired.push_back(std::move(it->second));
        it = waiters_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (Waiter& w : expired) {
    w.done(absl::DeadlineExceededError(
        StrCat("waited ", absl::ToInt64Milliseconds(w.wait),
               " ms (await_kv_transfer_ms) for the KV transfer; the prefill worker did not "
               "complete it")));
  }
}

void KvReceiver::ClaimWhenComplete(const std::string& transfer_id, absl::Duration wait,
                                   std::function<void(absl::Status)> done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = transfers_.find(transfer_id);
    if (it == transfers_.end() || !it->second.complete) {
      if (!waiters_.contains(transfer_id)) {
        waiters_.emplace(transfer_id, Waiter{absl::Now() + wait, wait, std::move(done)});
        wake_.notify_all();  // the watcher ends the wait at its deadline
        return;
      }
    }
  }
  if (!done) return;
  // Complete already (or a second waiter, which Claim refuses if the first one won).
  done(Claim(transfer_id));
}

bool KvReceiver::CancelWait(const std::string& transfer_id) {
  std::lock_guard<std::mutex> lock(mu_);
  return waiters_.erase(transfer_id) > 0;
}

absl::StatusOr<pb::TransferTicket> KvReceiver::Reserve(const pb::ReserveRequest& req,
                                                       std::string caller) {
  BATON_ASSIGN_OR_RETURN(std::vector<kvcache::PageLayout> senders,
                         CheckReserveRequest(req, rank_layouts_, transport::TicketLimits()));
  absl::Duration lease =
      req.lease_ms() == 0 ? options_.default_lease : absl::Milliseconds(req.lease_ms());
  lease = std::min(lease, options_.max_lease);

  std::vector<int32_t> prompt(req.prompt_ids().begin(), req.prompt_ids().end());
  const int64_t prompt_tokens = static_cast<int64_t>(prompt.size());
  BATON_ASSIGN_OR_RETURN(engine::KvReservation reserved,
                         engine_->ReserveKv(req.request_id(), std::move(prompt), req.cache_salt()));
  const absl::Time deadline = absl::Now() + lease;
  transport::TransferTicket t;
  t.request_id = req.request_id();
  t.worker_address = ucx_->address();
  t.rkey = region_->packed_rkey();
  t.pool_base = region_->base();
  t.pool_bytes = region_->bytes();
  t.layout = layout_;
  t.prompt_tokens = prompt_tokens;
  t.first_block = static_cast<int32_t>(reserved.cached_blocks);
  t.page_ids = reserved.pages;
  for (const kvcache::BlockHash& h : reserved.cached_hashes) {
    t.cached_block_hashes.emplace_back(reinterpret_cast<const char*>(h.bytes.data()),
                                       h.bytes.size());
  }
  t.lease_deadline_unix_ms = absl::ToUnixMillis(deadline);
  if (!senders.empty()) t.ranks = rank_pools_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    transfers_[t.request_id] = Transfer{t, false, std::move(senders)};
  }
  absl::Status leased = leases_.Add({t.request_id, reserved.pages, deadline, std::move(caller)});
  if (!leased.ok()) {
    Drop(t.request_id, leased);
    return leased;
  }
  wake_.notify_all();  // the watcher may need an earlier wake-up
  UpdateGauges();
  return ToProto(t);
}

absl::Status KvReceiver::Complete(const pb::TransferComplete& req) {
  auto failed = [&](absl::Status status, const char* reason) {
    if (metrics_ != nullptr) metrics_->CountFailed("receiver", reason);
    return status;
  };
  const transport::TicketLimits limits;
  absl::StatusOr<transport::TransferComplete> c = FromProto(req, limits);
  if (!c.ok()) return failed(c.status(), "complete");
  const int32_t vocab = static_cast<int32_t>(engine_->model().model->config().vocab_size);
  absl::StatusOr<engine::SampledToken> first = FirstTokenFromProto(req, vocab);
  if (!first.ok()) return failed(first.status(), "complete");
  Transfer transfer;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = transfers_.find(c->request_id);
    if (it == transfers_.end() || it->second.complete) {
      return failed(absl::NotFoundError(StrCat("no reservation awaits completion under this "
                                               "request_id (",
                                               c->request_id.size(),
                                               " bytes): it expired, was released or was "
                                               "completed already")),
                    "complete");
    }
    transfer = it->second;
  }
  const transport::TransferTicket& ticket = transfer.ticket;
  // The lease is ours while we check: the watcher cannot free the pages under us.
  absl::StatusOr<transport::Lease> lease = leases_.Take(c->request_id);
  if (!lease.ok()) {
    return failed(absl::DeadlineExceededError(
                      "the reservation's lease ended before the transfer completed; the "
                      "pages were freed"),
                  "expired");
  }
  absl::Status valid = transport::ValidateComplete(*c, ticket, vocab);
  uint64_t received = 0;
  if (valid.ok() && !transfer.senders.empty()) {
    absl::StatusOr<uint64_t> bytes = VerifySlices(transfer, *c);
    valid = bytes.status();
    if (valid.ok()) received = *bytes;
  } else if (valid.ok()) {
    const kvcache::KvChecksum sum =
        kvcache::PromptKvChecksum(engine_->kv_pool_data(), engine_->kv_layout(), ticket.page_ids,
                                  ticket.first_block, ticket.prompt_tokens);
    received = sum.bytes;
    if (sum.hash != c->checksum) {
      valid = absl::DataLossError(StrCat("the KV pages' checksum is ", sum.hash, " over ",
                                         sum.bytes, " bytes; the sender's is ", c->checksum,
                                         ": the transfer lost or misplaced data"));
    }
  }
  if (valid.ok()) {
    valid = engine_->CompleteKv(c->request_id, *std::move(first), req.cached_tokens());
    if (valid.ok() && metrics_ != nullptr) metrics_->ObserveReceived(received);
  }
  if (!valid.ok()) {
    Drop(c->request_id, valid);
    UpdateGauges();
    return failed(valid, valid.code() == absl::StatusCode::kDataLoss ? "checksum" : "complete");
  }
  // Until a Generate call claims it; a router that died meanwhile leaves it to expire. The
  // lease is in place before the transfer reads as complete, so that a waiter's claim
  // finds it.
  lease->deadline = absl::Now() + options_.claim_lease;
  absl::Status leased = leases_.PutBack(*std::move(lease));
  if (!leased.ok()) {
    Drop(c->request_id, leased);
    UpdateGauges();
    return leased;
  }
  std::function<void(absl::Status)> waiter;
  {
    std::lock_guard<std::mutex> lock(mu_);
    transfers_[c->request_id].complete = true;
    // Taken out in the same step, so that a CancelWait either comes first (no claim) or
    // finds nothing (the waiter owns what it claims).
    if (auto it = waiters_.find(c->request_id); it != waiters_.end()) {
      waiter = std::move(it->second.done);
      waiters_.erase(it);
    }
  }
  if (waiter) waiter(Claim(c->request_id));
  UpdateGauges();
  return absl::OkStatus();
}

absl::StatusOr<absl::Time> KvReceiver::KeepAlive(const pb::KeepAliveRequest& req) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = transfers_.find(req.request_id());
    if (it == transfers_.end() || it->second.complete) {
      return absl::NotFoundError(
          "no reservation is being written under this request_id: it expired, was released or "
          "was completed");
    }
  }
  absl::Duration lease =
      req.lease_ms() == 0 ? options_.default_lease : absl::Milliseconds(req.lease_ms());
  lease = std::min(lease, options_.max_lease);
  // Take and re-add: while it is out of the table the watcher cannot expire it.
  absl::StatusOr<transport::Lease> held = leases_.Take(req.request_id());
  if (!held.ok()) {
    return absl::NotFoundError("the reservation's lease ended; its pages were freed");
  }
  const absl::Time deadline = absl::Now() + lease;
  held->deadline = deadline;
  if (absl::Status s = leases_.PutBack(*std::move(held)); !s.ok()) {
    Drop(req.request_id(), s);
    return s;
  }
  return deadline;
}

void KvReceiver::Release(const std::string& transfer_id) {
  const absl::Status released = absl::AbortedError(
      StrCat("the KV transfer '", transfer_id,
             "' was released before it completed: the prefill failed or was cancelled"));
  if (leases_.Take(transfer_id).ok()) {
    Drop(transfer_id, released);
  } else {
    Settle(transfer_id, released);  // released before it was even reserved
  }
  UpdateGauges();
}

absl::Status KvReceiver::Claim(const std::string& transfer_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = transfers_.find(transfer_id);
    if (it == transfers_.end() || !it->second.complete) {
      return absl::FailedPreconditionError(
          StrCat("no completed KV transfer has id '", transfer_id,
                 "': it was never completed, it expired, or another request claimed it"));
    }
  }
  if (!leases_.Take(transfer_id).ok()) {
    return absl::FailedPreconditionError(
        StrCat("the KV transfer '", transfer_id, "' expired or was claimed already"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  transfers_.erase(transfer_id);
  UpdateGauges();
  return absl::OkStatus();
}

}  // namespace baton::worker
