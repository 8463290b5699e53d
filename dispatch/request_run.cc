#include "dispatch/request_run.h"

#include <utility>

#include "common/strings.h"
#include "dispatch/remote_prefill.h"

namespace baton::dispatch {

namespace pb = ::baton::internal::v1;
using Clock = std::chrono::steady_clock;

absl::StatusOr<pb::GenerateRequest> WorkerRequest(const GenerationRequest& r, int choice) {
  if (r.params.stop_size() > 0) {
    return absl::InvalidArgumentError("stop strings belong in GenerationRequest::stop");
  }
  pb::GenerateRequest wire;
  wire.set_request_id(r.n == 1 ? r.request_id : StrCat(r.request_id, "-", choice));
  wire.mutable_prompt_ids()->Add(r.prompt_ids.begin(), r.prompt_ids.end());
  *wire.mutable_params() = r.params;
  if (choice > 0 && r.params.has_seed()) wire.mutable_params()->set_seed(r.params.seed() + choice);
  wire.set_priority(r.priority);
  wire.set_cache_salt(r.cache_salt);
  wire.set_detokenize(false);
  wire.set_trace(r.trace);
  return wire;
}

RequestRun::RequestRun(grpc::CompletionQueue* cq, Route route, pb::GenerateRequest wire,
                       ChoiceDecoder decoder, RunOptions options, RunCallbacks callbacks)
    : cq_(cq),
      route_(std::move(route)),
      wire_(std::move(wire)),
      decoder_(std::move(decoder)),
      options_(std::move(options)),
      callbacks_(std::move(callbacks)) {
  if (options_.trace) trace_ = std::make_shared<baton::v1::RequestTrace>();
}

RequestRun::~RequestRun() = default;

std::unique_ptr<RequestRun> RequestRun::Start(grpc::CompletionQueue* cq, Route route,
                                              pb::GenerateRequest wire, ChoiceDecoder decoder,
                                              RunOptions options, RunCallbacks callbacks) {
  std::unique_ptr<RequestRun> run(new RequestRun(cq, std::move(route), std::move(wire),
                                                 std::move(decoder), std::move(options),
                                                 std::move(callbacks)));
  // Every step runs on the loop's thread, the first one too: a split attempt's two calls
  // may complete before the caller's thread would have finished starting them.
  run->begin_alarm_.Set(cq, gpr_now(GPR_CLOCK_MONOTONIC), &run->begin_step_);
  return run;
}

void RequestRun::OnBegin(bool ok) {
  if (!ok) return End(absl::UnavailableError("the router is shutting down"));
  Begin();
}

void RequestRun::Begin() {
  // Both legs of a split route sample as one sequence (the first token on the prefill
  // worker, the rest on the decode worker), and so does a stream migrated to another
  // worker: the seed is the router's.
  if (route_.prefill != nullptr || migration_limit() > 0) EnsureSeed(&wire_);
  if (route_.prefill != nullptr) {
    prefill_ = route_.prefill;
    StartSplitAttempt();
  } else {
    StartDecode();
  }
}

void RequestRun::StartSplitAttempt() {
  transfer_id_ = TransferId(wire_, attempt_);
  decode_status_ = grpc::Status();
  StartPrefill();
  sequential_ = route_.pool != nullptr && !route_.pool->decode_with_prefill();
  if (sequential_) return;  // OnPrefillDone opens the decode stream
  // The decode stream opens now and waits on the decode worker for the transfer, so the
  // first token needs no router round trip after the prefill's reply.
  wire_.set_kv_transfer_id(transfer_id_);
  wire_.set_await_kv_transfer_ms(kAwaitKvTransferMs);
  StartDecode();
}

bool RequestRun::cancelled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cancelled_;
}

void RequestRun::Cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  cancelled_ = true;
  // A context cancelled before its call starts cancels the call as it starts.
  if (decode_ctx_ != nullptr) decode_ctx_->TryCancel();
  if (prefill_ctx_ != nullptr) prefill_ctx_->TryCancel();
}

void RequestRun::StartPrefill() {
  prefill_req_ = PrefillCall(wire_, transfer_id_, route_);
  prefill_started_ = Clock::now();
  prefill_pending_ = true;
  prefill_failed_ = false;
  auto ctx = std::make_unique<grpc::ClientContext>();
  if (options_.deadline) ctx->set_deadline(*options_.deadline);
  {
    std::lock_guard<std::mutex> lock(mu_);
    prefill_ctx_ = std::move(ctx);
    if (cancelled_) prefill_ctx_->TryCancel();  // a Cancel that came between attempts
  }
  prefill_reader_ = prefill_->stub()->PrepareAsyncPrefill(prefill_ctx_.get(), prefill_req_, cq_);
  prefill_reader_->StartCall();
  prefill_reader_->Finish(&prefill_resp_, &prefill_status_, &prefill_step_);
}

void RequestRun::OnPrefillDone(bool /*ok*/) {
  prefill_pending_ = false;
  AddPrefillCall(prefill_status_, prefill_resp_,
                 std::chrono::duration<double>(Clock::now() - prefill_started_).count(),
                 &prefill_timings_);
  if (prefill_status_.ok() && !cancelled()) {
    route_.PromptDone();
    RecordPrefill(route_, prefill_status_, prefill_resp_, {});
    TracePrefill();
    if (sequential_) {  // --no-decode-with-prefill: the transfer is complete now
      sequential_ = false;
      wire_.set_kv_transfer_id(transfer_id_);
      wire_.clear_await_kv_transfer_ms();
      StartDecode();
      return;
    }
  } else {
    prefill_failed_ = true;
    // Unless the decode stream is already serving (the transfer completed before the
    // failure), this attempt is over: its stream must not deliver, and it is waiting for
    // a transfer that will not come.
    if (messages_ == 0 && decode_pending_) {
      abandoned_ = true;
      decode_ctx_->TryCancel();
    }
  }
  if (held_final_) {  // the final delta waited for the prefill's timings
    ChoiceDelta d = *std::move(held_final_);
    held_final_.reset();
    DeliverFinal(std::move(d));
  }
  Settle();
}

void RequestRun::StartDecode() {
  auto ctx = std::make_unique<grpc::ClientContext>();
  if (options_.deadline) ctx->set_deadline(*options_.deadline);
  {
    std::lock_guard<std::mutex> lock(mu_);
    decode_ctx_ = std::move(ctx);
    if (cancelled_) decode_ctx_->TryCancel();
  }
  decode_pending_ = true;
  decode_started_ = Clock::now();
  abandoned_ = false;
  decode_status_ = grpc::Status();
  reader_ = route_.decode->stub()->PrepareAsyncGenerate(decode_ctx_.get(), wire_, cq_);
  reader_->StartCall(&start_step_);
}

void RequestRun::OnDecodeStart(bool ok) {
  if (ok) {
    reader_->Read(&msg_, &read_step_);
  } else {
    reader_->Finish(&decode_status_, &finish_step_);
  }
}

void RequestRun::OnRead(bool ok) {
  if (!ok) {  // the stream ended (or was cancelled): its status, then OnDecodeFinish
    reader_->Finish(&decode_status_, &finish_step_);
    return;
  }
  if (abandoned_) {  // drained until the worker closes the stream
    reader_->Read(&msg_, &read_step_);
    return;
  }
  ++messages_;
  generated_.insert(generated_.end(), msg_.token_ids().begin(), msg_.token_ids().end());
  TraceDecodeSteps();
  route_.PromptDone();
  if (!error_.ok() || decoder_.ended()) {
    reader_->Read(&msg_, &read_step_);
    return;
  }
  const std::chrono::steady_clock::time_point received = std::chrono::steady_clock::now();
  ChoiceDelta d;
  absl::StatusOr<bool> has_delta = decoder_.Process(msg_, &d);
  d.received = received;
  if (!has_delta.ok()) {
    error_ = has_delta.status();
    decode_ctx_->TryCancel();
  } else if (*has_delta) {
    if (d.finished && prefill_pending_) {
      held_final_ = std::move(d);  // delivered with the prefill's timings, once they are in
    } else if (d.finished) {
      DeliverFinal(std::move(d));
    } else {
      callbacks_.on_delta(d);
    }
    // The worker would generate on; its stream then ends CANCELLED.
    if (decoder_.ended() && decoder_.stopped_by_string()) decode_ctx_->TryCancel();
  }
  reader_->Read(&msg_, &read_step_);  // until the worker closes the stream
}

void RequestRun::OnDecodeFinish(bool /*ok*/) {
  decode_pending_ = false;
  Settle();
}

bool RequestRun::Reroute() {
  if (!options_.may_reroute || rerouted_ || messages_ > 0 || !error_.ok() ||
      decode_status_.error_code() != grpc::StatusCode::UNAVAILABLE || cancelled()) {
    return false;
  }
  absl::StatusOr<Route> next = RerouteAfterFailure(
      route_, std::span<const int32_t>(wire_.prompt_ids().data(), wire_.prompt_ids().size()),
      wire_.cache_salt(), options_.session);
  if (!next.ok()) return false;
  rerouted_ = true;
  // A split attempt's reservation on the worker left behind: released if that worker can
  // still hear it (one that stopped answering frees it when its lease ends).
  ReleaseUnclaimedTransfer();
  route_ = *std::move(next);
  reader_.reset();  // it refers to the old context, which StartDecode replaces
  wire_.clear_kv_transfer_id();
  wire_.clear_await_kv_transfer_ms();
  transfer_id_.clear();
  prefill_failed_ = false;
  attempt_ = 1;  // a fresh transfer id
  Begin();
  return true;
}

int RequestRun::migration_limit() const {
  // The pool a route came from (routes made by hand have none, and do not migrate).
  const WorkerPool* pool = route_.load != nullptr ? route_.load->pool() : nullptr;
  return pool != nullptr ? pool->migration_limit() : 0;
}

bool RequestRun::Migrate() {
  const int64_t max_tokens = wire_.params().has_max_tokens() ? wire_.params().max_tokens() : -1;
  if (migrations_ >= migration_limit() || !error_.ok() || cancelled() ||
      decode_status_.error_code() != grpc::StatusCode::UNAVAILABLE || generated_.empty() ||
      (max_tokens >= 0 && static_cast<int64_t>(generated_.size()) >= max_tokens)) {
    return false;
  }
  // Placed by the whole context the new worker computes.
  std::vector<int32_t> context(wire_.prompt_ids().begin(), wire_.prompt_ids().end());
  context.insert(context.end(), generated_.begin(), generated_.end());
  absl::StatusOr<Route> next =
      RerouteAfterFailure(route_, context, wire_.cache_salt(), options_.session);
  if (!next.ok()) return false;
  ++migrations_;
  if (RouterMetrics* metrics = route_.load->pool()->metrics(); metrics != nullptr) {
    metrics->CountMigration();
  }
  route_ = *std::move(next);
  // The decode worker computes the context itself: a prefill worker samples only a
  // sequence's first token.
  route_.prefill = nullptr;
  reader_.reset();  // it refers to the old context, which StartDecode replaces
  wire_.clear_kv_transfer_id();
  wire_.clear_await_kv_transfer_ms();
  wire_.mutable_output_ids()->Assign(generated_.begin(), generated_.end());
  // A new id on the new worker: the old one may still hold the first (a stopped worker
  // that comes back).
  wire_.set_request_id(StrCat(wire_.request_id(), "~m", migrations_));
  transfer_id_.clear();
  StartDecode();
  return true;
}

void RequestRun::ReleaseUnclaimedTransfer() {
  if (!transfer_id_.empty() && messages_ == 0) ReleaseTransfer(*route_.decode, transfer_id_, cq_);
}

// Once neither call of the attempt is in flight: how the run goes on, or ends.
void RequestRun::Settle() {
  if (prefill_pending_ || decode_pending_) return;
  if (decoder_.ended()) return End(absl::OkStatus());
  if (!error_.ok()) return End(error_);
  if (messages_ > 0) {  // the stream broke after it served
    if (Migrate()) return;
    return EndWithDecodeStatus();
  }
  // Nothing was delivered.
  if (cancelled()) {
    ReleaseUnclaimedTransfer();
    return End(absl::CancelledError("the request was cancelled"));
  }
  // A decode worker that cannot be reached: start over elsewhere (its pages are moot).
  if (Reroute()) return;
  if (!prefill_failed_) {
    ReleaseUnclaimedTransfer();
    return EndWithDecodeStatus();
  }
  const AfterPrefill next = DecideAfterPrefillFailure(route_, prefill_, prefill_status_, attempt_);
  RecordPrefill(route_, prefill_status_, prefill_resp_, next);
  // A prefill worker that failed mid-transfer, or one that finished just as the cancel
  // came, may leave this attempt's reservation on the decode worker.
  ReleaseTransfer(*route_.decode, transfer_id_, cq_);
  reader_.reset();  // a new decode stream replaces the abandoned one
  switch (next.action) {
    case AfterPrefill::kRetry:
      ++attempt_;
      prefill_ = next.worker;
      StartSplitAttempt();
      return;
    case AfterPrefill::kLocal:
      // The decode worker computes the prompt itself: nothing to wait for.
      transfer_id_.clear();
      prefill_failed_ = false;
      wire_.clear_kv_transfer_id();
      wire_.clear_await_kv_transfer_ms();
      StartDecode();
      return;
    case AfterPrefill::kFail:
      End(prefill_->ToStatus(prefill_status_));
      return;
  }
}

void RequestRun::DeliverFinal(ChoiceDelta d) {
  d.prefill = prefill_timings_;
  d.trace = trace_;
  callbacks_.on_delta(d);
}

void RequestRun::TraceDecodeSteps() {
  if (trace_ == nullptr || decoder_.ended()) return;
  const double offset = std::chrono::duration<double>(decode_started_ - options_.arrival).count();
  for (const baton::v1::StepTrace& s : msg_.trace_steps()) {
    baton::v1::StepTrace* t = trace_->add_steps();
    *t = s;
    t->set_start_seconds(s.start_seconds() + offset);
  }
  if (msg_.trace_truncated()) trace_->set_truncated(true);
  trace_->set_worker(route_.decode->target());
}

void RequestRun::TracePrefill() {
  if (trace_ == nullptr) return;
  baton::v1::PrefillTrace* p = trace_->mutable_prefill();
  p->set_worker(prefill_->target());
  p->set_call_seconds(prefill_timings_.seconds);
  p->set_queue_seconds(prefill_resp_.queue_seconds());
  p->set_compute_seconds(prefill_resp_.compute_seconds());
  p->set_transfer_seconds(prefill_resp_.transfer_seconds());
  p->set_exposed_transfer_seconds(prefill_resp_.exposed_transfer_seconds());
  p->set_kv_bytes_sent(prefill_resp_.bytes_sent());
  p->set_blocks_sent(prefill_resp_.blocks_sent());
  p->set_blocks_cached_on_decode(prefill_resp_.blocks_cached_on_decode());
  p->set_cached_tokens(prefill_resp_.usage().cached_tokens());
  p->clear_steps();
  const double offset = std::chrono::duration<double>(prefill_started_ - options_.arrival).count();
  for (const baton::v1::StepTrace& s : prefill_resp_.trace_steps()) {
    baton::v1::StepTrace* t = p->add_steps();
    *t = s;
    t->set_start_seconds(s.start_seconds() + offset);
  }
}

void RequestRun::EndWithDecodeStatus() {
  if (!decode_status_.ok()) return End(route_.decode->ToStatus(decode_status_));
  End(absl::InternalError(StrCat("the worker at ", route_.decode->target(),
                                 " ended a stream without its final message")));
}

void RequestRun::End(absl::Status status) {
  // The owner may destroy the run inside on_done: nothing here touches `this` after it.
  std::function<void(const absl::Status&)> on_done = std::move(callbacks_.on_done);
  if (on_done) on_done(status);
}

}  // namespace baton::dispatch
