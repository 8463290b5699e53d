#include "worker/kv_sender.h"

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "baton/internal/v1/rank_kv.pb.h"

#include "common/status.h"
#include "common/strings.h"
#include "kvcache/slice_copy.h"
#include "service/grpc_status.h"
#include "worker/rank_kv.h"
#include "worker/slice_kv_sink.h"
#include "worker/step_trace_proto.h"
#include "worker/transfer_ticket_proto.h"
#include "worker/ucx_kv_sink.h"
#include "worker/worker_service.h"

namespace baton::worker {
namespace {

namespace pb = ::baton::internal::v1;
using Clock = std::chrono::steady_clock;

constexpr int64_t kPollMs = 20;
constexpr absl::Duration kPeerCheck = absl::Milliseconds(250);

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// A UcxKvSink that holds its peer's pool (and so its endpoint) for as long as it pushes.
class HeldUcxKvSink : public UcxKvSink {
 public:
  HeldUcxKvSink(std::shared_ptr<RemotePool> peer, const transport::RegisteredRegion* local_region,
                const void* local_pool, const kvcache::PageLayout& layout,
                const transport::TransferTicket& ticket, absl::Duration flush_timeout)
      : UcxKvSink(peer->ep.get(), peer->region.get(), local_region, local_pool, layout, ticket,
                  flush_timeout),
        peer_(std::move(peer)) {}

 private:
  std::shared_ptr<RemotePool> peer_;
};

}  // namespace

KvSender::KvSender(engine::Engine* engine, transport::UcxWorker* ucx,
                   const transport::RegisteredRegion* pool, const KvSenderOptions& options,
                   WorkerMetrics* metrics, SenderGroup group)
    : engine_(engine),
      ucx_(ucx),
      options_(options),
      metrics_(metrics),
      layout_(engine->kv_layout()),
      region_(pool),
      group_(std::move(group)),
      pools_(ucx, options.flush_timeout) {
  if (group_.layouts.empty()) group_.layouts = {layout_};
}

KvSender::~KvSender() = default;

pb::KvTransfer::Stub* KvSender::StubFor(const std::string& target) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& stub = stubs_[target];
  if (stub == nullptr) {
    stub = pb::KvTransfer::NewStub(options_.auth->Channel(target));
  }
  return stub.get();
}

absl::StatusOr<std::shared_ptr<PushSink>> KvSender::SinkFor(const transport::TransferTicket& t,
                                                            const pb::TransferTicket& wire) {
  if (t.ranks.empty()) {
    BATON_ASSIGN_OR_RETURN(std::shared_ptr<RemotePool> peer,
                           pools_.Get(t.worker_address, t.rkey, t.pool_base, t.pool_bytes));
    return std::shared_ptr<PushSink>(std::make_shared<HeldUcxKvSink>(
        std::move(peer), region_, engine_->kv_pool_data(), layout_, t, options_.flush_timeout));
  }
  if (group_.backend == nullptr) {
    BATON_ASSIGN_OR_RETURN(std::vector<SliceTarget> targets, SliceTargetsOf(t, layout_, &pools_));
    return std::shared_ptr<PushSink>(std::make_shared<SliceKvSink>(
        std::make_unique<SlicePush>(region_, engine_->kv_pool_data(), layout_, 0, true,
                                    std::move(targets), t),
        options_.flush_timeout));
  }
  const uint64_t push = next_push_.fetch_add(1);
  pb::RankKvCall call;
  call.mutable_begin()->set_push(push);
  *call.mutable_begin()->mutable_ticket() = wire;
  for (bool w : kvcache::SliceWriters(group_.layouts)) call.mutable_begin()->add_writers(w);
  // From here the sink drops the push on every rank if it does not end.
  auto sink = std::make_shared<GroupKvSink>(group_.backend, push);
  BATON_ASSIGN_OR_RETURN(auto replies, group_.backend->CallRanks(call.SerializeAsString()));
  for (const absl::StatusOr<std::string>& r : replies) BATON_RETURN_IF_ERROR(r.status());
  return std::shared_ptr<PushSink>(sink);
}

absl::StatusOr<absl::Time> KvSender::KeepAlive(pb::KvTransfer::Stub* stub,
                                               const std::string& transfer_id,
                                               absl::Duration lease) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
  pb::KeepAliveRequest req;
  req.set_request_id(transfer_id);
  req.set_lease_ms(static_cast<uint32_t>(absl::ToInt64Milliseconds(lease)));
  pb::KeepAliveResponse resp;
  BATON_RETURN_IF_ERROR(service::FromGrpcStatus(stub->KeepAlive(&ctx, req, &resp),
                                                "the decode worker ended the reservation's lease"));
  return absl::FromUnixMillis(resp.lease_deadline_unix_ms());
}

void KvSender::Release(pb::KvTransfer::Stub* stub, const std::string& transfer_id) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  pb::ReleaseRequest req;
  req.set_request_id(transfer_id);
  pb::ReleaseResponse resp;
  (void)stub->Release(&ctx, req, &resp);  // a dead decode worker frees at its lease's end
}

absl::StatusOr<pb::PrefillResponse> KvSender::Run(const pb::PrefillRequest& req,
                                                  const std::function<bool()>& cancelled) {
  auto fail = [&](absl::Status status, const char* reason) {
    if (metrics_ != nullptr) metrics_->CountFailed("sender", reason);
    return status;
  };
  if (req.decode_worker().empty() || req.decode_worker().size() > 256) {
    return absl::InvalidArgumentError(StrCat("decode_worker is ", req.decode_worker().size(),
                                             " bytes; give the decode worker's host:port"));
  }
  BATON_ASSIGN_OR_RETURN(engine::EngineRequest request, FromProto(req.request()));
  if (request.id.empty()) {
    return absl::InvalidArgumentError("request.request_id is empty; it names the KV transfer");
  }
  request.params.max_tokens = 1;
  request.detokenize = false;
  pb::PrefillResponse out;
  const Clock::time_point arrived = Clock::now();  // a traced request's steps count from here

  // 1. Reserve.
  pb::KvTransfer::Stub* stub = StubFor(req.decode_worker());
  Clock::time_point t = Clock::now();
  pb::ReserveRequest reserve;
  reserve.set_request_id(request.id);
  reserve.mutable_prompt_ids()->Add(request.prompt_ids.begin(), request.prompt_ids.end());
  reserve.set_cache_salt(request.cache_salt);
  ToProto(layout_, reserve.mutable_sender_layout());
  for (const kvcache::PageLayout& l : group_.layouts) ToProto(l, reserve.add_sender_ranks());
  reserve.set_lease_ms(req.lease_ms());
  pb::TransferTicket wire;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
    absl::Status s = service::FromGrpcStatus(
        stub->Reserve(&ctx, reserve, &wire),
        StrCat("the decode worker ", req.decode_worker(), " refused Reserve"));
    if (!s.ok()) return fail(s, "reserve");
  }
  out.set_reserve_seconds(Since(t));

  // 2. Check the ticket; reach the decode worker's pool.
  const transport::TicketLimits limits;
  absl::StatusOr<transport::TransferTicket> ticket = FromProto(wire, limits);
  absl::Status ok = ticket.status();
  if (ok.ok()) {
    if (!ticket->ranks.empty()) {
      ok = transport::ValidateSlicedTicket(*ticket, group_.layouts, limits, absl::Now());
    } else if (group_.backend != nullptr) {
      ok = absl::FailedPreconditionError(
          "the decode worker answered a one-rank ticket to a group's reservation; it takes no "
          "sliced transfers (upgrade it)");
    } else {
      ok = transport::ValidateTicket(*ticket, layout_, limits, absl::Now());
    }
  }
  if (ok.ok() && ticket->request_id != request.id) {
    ok = absl::InvalidArgumentError("the ticket's request_id is not the one reserved");
  }
  if (ok.ok() && static_cast<size_t>(ticket->prompt_tokens) != request.prompt_ids.size()) {
    ok = absl::InvalidArgumentError(StrCat("the ticket's prompt_tokens is ", ticket->prompt_tokens,
                                           "; the prompt has ", request.prompt_ids.size()));
  }
  if (ok.ok()) {
    const std::vector<kvcache::BlockHash> mine =
        engine_->PromptBlockHashes(request.prompt_ids, request.cache_salt);
    for (int32_t b = 0; b < ticket->first_block && ok.ok(); ++b) {
      const kvcache::BlockHash& h = mine[static_cast<size_t>(b)];
      if (ticket->cached_block_hashes[static_cast<size_t>(b)] !=
          std::string_view(reinterpret_cast<const char*>(h.bytes.data()), h.bytes.size())) {
        ok = absl::FailedPreconditionError(
            StrCat("the decode worker's cached block ", b,
                   " has another hash than this worker computes: do both serve the same model "
                   "id and block-hash spec?"));
      }
    }
  }
  std::shared_ptr<PushSink> sink;
  if (ok.ok()) {
    absl::StatusOr<std::shared_ptr<PushSink>> made = SinkFor(*ticket, wire);
    ok = made.status();
    if (ok.ok()) sink = *std::move(made);
  }
  if (!ok.ok()) {
    sink.reset();  // a group's: dropped on every rank
    Release(stub, request.id);
    return fail(ok, "ticket");
  }

  // 3. Compute and push.
  request.kv_sink = sink;
  const double trace_offset = Since(arrived);
  absl::StatusOr<std::shared_ptr<engine::RequestStream>> stream = engine_->Submit(request);
  if (!stream.ok()) {
    Release(stub, request.id);
    return fail(stream.status(), "submit");
  }
  engine::TokenEvent e, last;
  absl::Status lost;  // the decode worker dropped the reservation meanwhile
  bool stopped = false;
  std::vector<int32_t> ids;
  // A long prompt may outlast the lease: renew it when a third of it is left.
  const absl::Time granted = absl::FromUnixMillis(ticket->lease_deadline_unix_ms);
  const absl::Duration lease = std::max(granted - absl::Now(), absl::Seconds(1));
  absl::Time renew_at = granted - lease / 3;
  // Shared memory cannot tell that the decode worker died: puts into its mapped pool still
  // succeed. There, a renewal every kPeerCheck doubles as a check that it is alive.
  const bool check_peer = !sink->detects_peer_failure();
  absl::Time check_at = absl::Now() + kPeerCheck;
  for (;;) {
    bool timed_out = false;
    if (!(*stream)->NextFor(&e, kPollMs, &timed_out)) {
      if (!timed_out) break;
      if (!stopped && (absl::Now() >= renew_at || (check_peer && absl::Now() >= check_at))) {
        absl::StatusOr<absl::Time> until = KeepAlive(stub, request.id, lease);
        check_at = absl::Now() + kPeerCheck;
        if (until.ok()) {
          renew_at = *until - lease / 3;
        } else {
          stopped = true;  // the pages are gone: stop computing for them
          (void)engine_->Cancel(request.id);
          lost = until.status();
        }
      }
      // A caller that left, or a decode worker that died, stops the compute now.
      if (!stopped && (cancelled() || !sink->health().ok())) {
        stopped = true;
        (void)engine_->Cancel(request.id);
      }
      continue;
    }
    ids.insert(ids.end(), e.token_ids.begin(), e.token_ids.end());
    if (!e.logprobs.empty()) last.logprobs = e.logprobs;
    AppendStepTraces(e.trace_steps, trace_offset, out.mutable_trace_steps());
    if (e.finished) {
      last.status = e.status;
      last.usage = e.usage;
      last.timings = e.timings;
      break;
    }
  }
  if (!last.status.ok() || ids.size() != 1 || !sink->result().complete || !lost.ok()) {
    Release(stub, request.id);
    absl::Status why = lost.ok() ? last.status : lost;
    if (why.ok()) why = absl::InternalError("the prefill ended without a first token");
    if (why.code() == absl::StatusCode::kCancelled && !sink->health().ok()) {
      why = absl::UnavailableError(
          StrCat("the KV transfer to the decode worker failed: ", sink->health().message()));
    }
    return fail(why, why.code() == absl::StatusCode::kCancelled ? "cancelled" : "push");
  }

  // 4. Complete.
  const KvPushResult& pushed = sink->result();
  transport::TransferComplete done;
  done.request_id = request.id;
  done.first_token = ids[0];
  done.blocks_written = static_cast<int32_t>(ticket->page_ids.size());
  // The ticket was validated: its page size is well formed.
  done.bytes_written = static_cast<uint64_t>(ticket->page_ids.size()) *
                       static_cast<uint64_t>(transport::TicketPageBytes(*ticket).value_or(0));
  done.checksum = pushed.checksum.hash;
  done.slices = pushed.slices;
  pb::TransferComplete complete = ToProto(done);
  if (request.params.logprobs >= 0 && !last.logprobs.empty()) {
    pb::TokenLogprob* lp = complete.mutable_first_token_logprob();
    lp->set_token_id(last.logprobs[0].id);
    lp->set_logprob(last.logprobs[0].logprob);
    for (const auto& [id, logprob] : last.logprobs[0].top_logprobs) {
      pb::TopLogprob* top = lp->add_top();
      top->set_token_id(id);
      top->set_logprob(logprob);
    }
  }
  complete.set_cached_tokens(last.usage.cached_tokens);
  t = Clock::now();
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
    pb::CompleteResponse resp;
    absl::Status s = service::FromGrpcStatus(
        stub->Complete(&ctx, complete, &resp),
        StrCat("the decode worker ", req.decode_worker(), " refused Complete"));
    if (!s.ok()) {
      Release(stub, request.id);
      return fail(s, "complete");
    }
  }
  out.set_complete_seconds(Since(t));
  if (metrics_ != nullptr) {
    metrics_->ObserveSent(pushed.bytes_sent, pushed.transfer_seconds, pushed.exposed_seconds);
  }
  out.set_first_token(ids[0]);
  out.mutable_usage()->set_prompt_tokens(last.usage.prompt_tokens);
  out.mutable_usage()->set_cached_tokens(last.usage.cached_tokens);
  out.set_queue_seconds(last.timings.queue_seconds);
  out.set_compute_seconds(last.timings.time_to_first_token_seconds - last.timings.queue_seconds);
  out.set_transfer_seconds(pushed.transfer_seconds);
  out.set_exposed_transfer_seconds(pushed.exposed_seconds);
  out.set_bytes_sent(pushed.bytes_sent);
  out.set_blocks_sent(static_cast<int32_t>(ticket->page_ids.size()));
  out.set_blocks_cached_on_decode(ticket->first_block);
  return out;
}

}  // namespace baton::worker
