#include "router/generation.h"

#include <chrono>
#include <cstdint>
#include <utility>

#include "common/status.h"
#include "common/strings.h"
#include "router/remote_prefill.h"

namespace baton::router {

namespace pb = ::baton::internal::v1;

// One choice: the worker's stream of one sequence, driven by its steps on the
// generation's completion queue.
class Generation::Leg final {
 public:
  Leg(Generation* g, int index, pb::GenerateRequest wire)
      : g_(g), wire(std::move(wire)), decoder(index, g->tokenizer_, g->request_) {}

 private:
  void OnStart(bool ok) {
    if (ok) {
      reader->Read(&msg, &read_step);
    } else {
      reader->Finish(&status, &finish_step);
    }
  }
  void OnReadDone(bool ok) { g_->OnRead(*this, ok); }
  void OnFinish(bool /*ok*/) { g_->OnLegDone(*this, status); }
  void OnPrefillFinish(bool /*ok*/) { g_->OnPrefillDone(*this, prefill_status); }

  Generation* g_;

 public:
  MemberTag<Leg> start_step{this, &Leg::OnStart};
  MemberTag<Leg> read_step{this, &Leg::OnReadDone};
  MemberTag<Leg> finish_step{this, &Leg::OnFinish};
  MemberTag<Leg> prefill_step{this, &Leg::OnPrefillFinish};

  grpc::ClientContext ctx;
  pb::GenerateRequest wire;
  std::unique_ptr<grpc::ClientAsyncReader<pb::GenerateResponse>> reader;
  pb::GenerateResponse msg;
  grpc::Status status;    // the stream's, once finished
  ChoiceDecoder decoder;  // used only on this leg's read path, one read at a time
  int messages = 0;       // read from the worker

  // The prefill leg of a split route; one attempt at a time.
  int attempt = 0;
  WorkerClient* prefill = nullptr;
  std::string transfer_id;
  std::mutex prefill_mu;  // guards prefill_ctx against Cancel from another thread
  std::unique_ptr<grpc::ClientContext> prefill_ctx;
  std::unique_ptr<grpc::ClientAsyncResponseReader<pb::PrefillResponse>> prefill_reader;
  pb::PrefillRequest prefill_req;
  pb::PrefillResponse prefill_resp;
  grpc::Status prefill_status;
  std::chrono::steady_clock::time_point prefill_started;
  PrefillTimings prefill_timings;  // handed on with the final delta
};

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
  return wire;
}

Generation::Generation(grpc::CompletionQueue* cq, Route route,
                       std::shared_ptr<const tokenizer::Tokenizer> tokenizer,
                       GenerationRequest request, GenerationCallbacks callbacks)
    : cq_(cq),
      route_(std::move(route)),
      tokenizer_(std::move(tokenizer)),
      request_(std::move(request)),
      callbacks_(std::move(callbacks)) {}

absl::StatusOr<std::unique_ptr<Generation>> Generation::Start(
    CompletionLoops* loops, Route route, std::shared_ptr<const tokenizer::Tokenizer> tokenizer,
    GenerationRequest request, GenerationCallbacks callbacks) {
  std::unique_ptr<Generation> g(new Generation(loops->Pick(), std::move(route),
                                               std::move(tokenizer), std::move(request),
                                               std::move(callbacks)));
  BATON_RETURN_IF_ERROR(g->StartLegs());
  return g;
}

absl::StatusOr<std::unique_ptr<Generation>> Generation::Start(
    CompletionLoops* loops, Route route, std::shared_ptr<const tokenizer::Tokenizer> tokenizer,
    GenerationRequest request) {
  std::unique_ptr<Generation> g(new Generation(loops->Pick(), std::move(route),
                                               std::move(tokenizer), std::move(request),
                                               GenerationCallbacks()));
  Generation* self = g.get();
  // Pull mode is push mode into a queue that Next() drains.
  g->callbacks_.on_delta = [self](const ChoiceDelta& d) {
    std::lock_guard<std::mutex> lock(self->mu_);
    self->queue_.push_back(d);
    self->cv_.notify_all();
  };
  g->callbacks_.on_done = [self](const absl::Status&) {
    std::lock_guard<std::mutex> lock(self->mu_);
    self->pull_done_ = true;
    self->cv_.notify_all();
  };
  BATON_RETURN_IF_ERROR(g->StartLegs());
  return g;
}

absl::Status Generation::StartLegs() {
  const GenerationRequest& r = request_;
  if (r.n < 1) return absl::InvalidArgumentError("'n' must be at least 1");
  // Every request is built before any call starts, so a bad one leaves nothing running.
  for (int i = 0; i < r.n; ++i) {
    BATON_ASSIGN_OR_RETURN(pb::GenerateRequest wire, WorkerRequest(r, i));
    legs_.push_back(std::make_unique<Leg>(this, i, std::move(wire)));
    if (r.deadline) legs_.back()->ctx.set_deadline(*r.deadline);
  }
  open_legs_ = r.n;
  started_ = true;
  // A leg's callbacks may reroute it (adding a leg) while later legs are being started.
  std::vector<Leg*> to_start;
  for (auto& leg : legs_) to_start.push_back(leg.get());
  WorkerClient* const prefill = route_.prefill;
  for (Leg* leg : to_start) {
    if (prefill != nullptr) {
      EnsureSeed(&leg->wire);
      leg->prefill = prefill;
      StartPrefill(*leg);
    } else {
      StartDecode(*leg);
    }
  }
  return absl::OkStatus();
}

bool Generation::cancelled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cancelled_ || !status_.ok();
}

void Generation::StartPrefill(Leg& leg) {
  leg.transfer_id = TransferId(leg.wire, leg.attempt);
  leg.prefill_req = PrefillCall(leg.wire, leg.transfer_id, route_);
  leg.prefill_started = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lock(leg.prefill_mu);
    leg.prefill_ctx = std::make_unique<grpc::ClientContext>();
    if (request_.deadline) leg.prefill_ctx->set_deadline(*request_.deadline);
    if (cancelled()) leg.prefill_ctx->TryCancel();  // a Cancel that came between attempts
  }
  leg.prefill_reader =
      leg.prefill->stub()->PrepareAsyncPrefill(leg.prefill_ctx.get(), leg.prefill_req, cq_);
  leg.prefill_reader->StartCall();
  leg.prefill_reader->Finish(&leg.prefill_resp, &leg.prefill_status, &leg.prefill_step);
}

void Generation::OnPrefillDone(Leg& leg, const grpc::Status& s) {
  AddPrefillCall(
      s, leg.prefill_resp,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - leg.prefill_started).count(),
      &leg.prefill_timings);
  if (s.ok()) {
    route_.PromptDone();
    RecordPrefill(route_, s, leg.prefill_resp, {});
    leg.wire.set_kv_transfer_id(leg.transfer_id);
    StartDecode(leg);
    return;
  }
  const AfterPrefill next =
      cancelled() ? AfterPrefill{} : DecideAfterPrefillFailure(route_, leg.prefill, s, leg.attempt);
  RecordPrefill(route_, s, leg.prefill_resp, next);
  switch (next.action) {
    case AfterPrefill::kRetry:
      ++leg.attempt;
      leg.prefill = next.worker;
      StartPrefill(leg);
      return;
    case AfterPrefill::kLocal:
      StartDecode(leg);  // the decode worker computes the prompt itself
      return;
    case AfterPrefill::kFail:
      if (!cancelled()) Fail(leg.prefill->ToStatus(s));
      OnLegDone(leg, s);
      return;
  }
}

void Generation::StartDecode(Leg& leg) {
  leg.reader = route_.decode->stub()->PrepareAsyncGenerate(&leg.ctx, leg.wire, cq_);
  leg.reader->StartCall(&leg.start_step);
}

Generation::~Generation() {
  CancelAll();
  std::unique_lock<std::mutex> lock(mu_);
  // Legs that never started (Start failed) have nothing to wait for.
  cv_.wait(lock, [this] { return done_ || !started_; });
}

absl::Status Generation::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

void Generation::Cancel() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
  }
  CancelAll();
}

void Generation::CancelAll() {
  // TryCancel is thread-safe, and a context
  // cancelled before its call starts cancels the call as it starts.
  std::lock_guard<std::mutex> legs_lock(legs_mu_);
  for (auto& leg : legs_) {
    leg->ctx.TryCancel();
    std::lock_guard<std::mutex> lock(leg->prefill_mu);
    if (leg->prefill_ctx != nullptr) leg->prefill_ctx->TryCancel();
  }
}

void Generation::Fail(absl::Status status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (status_.ok()) status_ = std::move(status);
  }
  CancelAll();
}

void Generation::OnRead(Leg& leg, bool ok) {
  if (!ok) {  // the stream ended (or was cancelled): its status, then OnLegDone
    leg.reader->Finish(&leg.status, &leg.finish_step);
    return;
  }
  ++leg.messages;
  route_.PromptDone();
  ChoiceDelta d;
  const bool was_ended = leg.decoder.ended();
  absl::StatusOr<bool> has_delta = leg.decoder.Process(leg.msg, &d);
  if (!has_delta.ok()) {
    Fail(has_delta.status());
  } else if (*has_delta) {
    if (d.finished) d.prefill = leg.prefill_timings;
    {
      std::lock_guard<std::mutex> deliver(deliver_mu_);
      bool failed = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        failed = !status_.ok();
      }
      if (!failed) callbacks_.on_delta(d);  // after a failure, nothing more is delivered
    }
    // The worker would generate on; its stream then ends CANCELLED.
    if (!was_ended && leg.decoder.stopped_by_string()) leg.ctx.TryCancel();
  }
  leg.reader->Read(&leg.msg, &leg.read_step);  // until the worker closes the stream
}

absl::Status StreamEndStatus(const ChoiceDecoder& decoder, bool cancelled,
                             const grpc::Status& status, const WorkerClient& worker) {
  if (decoder.ended()) return absl::OkStatus();
  if (cancelled) return absl::CancelledError("the request was cancelled");
  if (!status.ok()) return worker.ToStatus(status);
  return absl::InternalError(
      StrCat("the worker at ", worker.target(), " ended a stream without its final message"));
}

bool Generation::Reroute(const Leg& leg, const grpc::Status& s) {
  // One request (n = 1) whose worker could not be reached before it sent anything. With
  // several choices the other legs may be streaming from the same route; they are not
  // moved.
  if (request_.n != 1 || rerouted_ || leg.messages > 0 ||
      s.error_code() != grpc::StatusCode::UNAVAILABLE || cancelled()) {
    return false;
  }
  absl::StatusOr<Route> next =
      RerouteAfterFailure(route_, request_.prompt_ids, request_.cache_salt, request_.session);
  if (!next.ok()) return false;
  absl::StatusOr<pb::GenerateRequest> wire = WorkerRequest(request_, 0);
  if (!wire.ok()) return false;
  rerouted_ = true;
  route_ = *std::move(next);
  auto fresh = std::make_unique<Leg>(this, 0, *std::move(wire));
  if (request_.deadline) fresh->ctx.set_deadline(*request_.deadline);
  Leg* raw = fresh.get();
  {
    std::lock_guard<std::mutex> lock(legs_mu_);
    legs_.push_back(std::move(fresh));
  }
  if (cancelled()) raw->ctx.TryCancel();  // a Cancel that came before the push
  if (route_.prefill != nullptr) {
    EnsureSeed(&raw->wire);
    raw->prefill = route_.prefill;
    StartPrefill(*raw);
  } else {
    StartDecode(*raw);
  }
  return true;
}

void Generation::OnLegDone(Leg& leg, const grpc::Status& s) {
  if (Reroute(leg, s)) return;
  bool cancelled = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled = cancelled_;
  }
  absl::Status end = StreamEndStatus(leg.decoder, cancelled, s, *route_.decode);
  if (!leg.transfer_id.empty() && leg.messages == 0)
    ReleaseTransfer(*route_.decode, leg.transfer_id, cq_);
  if (!end.ok()) Fail(std::move(end));
  std::function<void(const absl::Status&)> on_done;
  absl::Status final_status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (--open_legs_ > 0) return;
    on_done = std::move(callbacks_.on_done);
    final_status = status_;
  }
  if (on_done) on_done(final_status);
  // The destructor waits for this, so an owner may destroy the generation on any thread
  // once on_done has run, but not inside it.
  std::lock_guard<std::mutex> lock(mu_);
  done_ = true;
  cv_.notify_all();
}

bool Generation::Next(ChoiceDelta* out) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !queue_.empty() || pull_done_; });
  if (queue_.empty()) return false;
  *out = std::move(queue_.front());
  queue_.pop_front();
  return true;
}

}  // namespace baton::router
