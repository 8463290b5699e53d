#include "frontdoor/grpc/generate_call.h"

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "common/check.h"
#include "common/param_error.h"
#include "common/status.h"
#include "common/strings.h"
#include "dispatch/choice_decoder.h"
#include "dispatch/request_run.h"
#include "dispatch/request_trace.h"
#include "frontdoor/grpc/wire_message.h"
#include "frontdoor/openai/request_builder.h"
#include "frontdoor/openai/tool_call_output.h"
#include "service/grpc_status.h"

namespace baton::frontdoor {
namespace {

namespace pb = ::baton::v1;
namespace ipb = ::baton::internal::v1;

// An error found past this front door (by the request checks both APIs share, or by the
// worker) names the OpenAI parameter; a baton.v1 client is told the field of its own
// GenerateRequest instead (in the status details' BadRequest), or no field when there is
// no such one.
absl::Status ToGrpcFieldName(absl::Status status) {
  const std::string param = ParamOf(status);
  if (param.empty()) return status;
  const std::string base = param.substr(0, param.find_first_of(".["));
  for (const char* f : {"temperature", "top_k", "top_p", "min_p", "repetition_penalty",
                        "presence_penalty", "frequency_penalty", "logit_bias", "seed"}) {
    if (base == f) return WithParam(std::move(status), StrCat("sampling.", param));
  }
  for (const char* f : {"max_tokens", "stop", "stop_token_ids"}) {
    if (base == f) return WithParam(std::move(status), StrCat("stop.", param));
  }
  if (base == "logprobs") return status;
  if (base == "prompt" || base == "messages") return WithParam(std::move(status), "input");
  return WithParam(std::move(status), "");
}
using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Appends a delta to the message being gathered for the client.
void Append(const dispatch::ChoiceDelta& d, pb::GenerateResponse* out) {
  out->mutable_token_ids()->Add(d.token_ids.begin(), d.token_ids.end());
  out->mutable_text()->append(d.text);
  for (const dispatch::TokenLogprob& lp : d.logprobs) {
    pb::TokenLogprob* o = out->add_logprobs();
    o->set_token_id(lp.token_id);
    o->set_token(lp.token);
    o->set_logprob(lp.logprob);
    for (const dispatch::TopLogprob& t : lp.top) {
      pb::TopLogprob* top = o->add_top();
      top->set_token_id(t.token_id);
      top->set_token(t.token);
      top->set_logprob(t.logprob);
    }
  }
  if (d.finished) {
    out->set_finished(true);
    out->set_finish_reason(d.finish_reason);
    out->set_stop_reason(d.stop_reason);
    out->mutable_usage()->set_prompt_tokens(d.prompt_tokens);
    out->mutable_usage()->set_cached_tokens(d.cached_tokens);
    out->mutable_usage()->set_completion_tokens(d.completion_tokens);
    pb::Timings* t = out->mutable_timings();
    t->set_queue_seconds(d.queue_seconds);
    t->set_num_preemptions(d.num_preemptions);
  }
}

// One call. Only its loop's thread touches it, so it needs no lock.
class GenerateCall {
 public:
  GenerateCall(const GrpcApiContext* c, AsyncGenerateService* service,
               grpc::ServerCompletionQueue* cq, ApiLoopState* state)
      : c_(*c), service_(service), cq_(cq), state_(state), responder_(&ctx_) {
    state_->live_calls.fetch_add(1);
  }

  // Waits for the next client on this queue.
  void Listen() {
    ctx_.AsyncNotifyWhenDone(&done_step_);
    service_->RequestGenerate(&ctx_, &raw_req_, &responder_, cq_, cq_, &accept_step_);
  }

 private:
  void OnAccept(bool ok) {
    if (!ok) {  // the server is shutting down; the done tag never comes for this call
      Delete();
      return;
    }
    if (!state_->stopping.load()) (new GenerateCall(&c_, service_, cq_, state_))->Listen();
    arrival_ = Clock::now();
    c_.metrics->running().Increment();
    absl::Status s = Prepare();
    if (!s.ok()) {
      final_status_ = s;
      Advance();
      return;
    }
    absl::StatusOr<dispatch::Route> route = c_.pool->Pick(
        std::span<const int32_t>(wire_.prompt_ids().data(), wire_.prompt_ids().size()),
        wire_.cache_salt(), run_options_.session, wire_.trace());
    if (!route.ok()) {
      final_status_ = route.status();
      Advance();
      return;
    }
    worker_started_ = true;
    record_.policy = route->policy;
    record_.expected_cached_tokens = route->expected_cached_tokens;
    record_.timings.route_seconds = route->route_seconds;
    route_explanation_ = route->explanation;
    if (wire_.trace()) {
      trace_prompt_.assign(wire_.prompt_ids().begin(), wire_.prompt_ids().end());
      trace_params_ = wire_.params();
    }
    run_ = dispatch::RequestRun::Start(
        cq_, *std::move(route), std::move(wire_), *std::move(decoder_), std::move(run_options_),
        {.on_delta = [this](const dispatch::ChoiceDelta& d) { Deliver(d); },
         .on_done = [this](const absl::Status& s) { OnRunDone(s); }});
  }

  absl::Status Prepare() {
    if (c_.drain != nullptr && c_.drain->draining()) {
      return absl::UnavailableError(
          "the router is shutting down (draining after SIGTERM); retry, and the call goes to "
          "another replica");
    }
    BATON_ASSIGN_OR_RETURN(const service::Tenant* tenant, CheckApiKey(ctx_, *c_.api_keys));
    // Held for the call, as the HTTP server holds a body's share until it has answered.
    BATON_ASSIGN_OR_RETURN(body_lease_, HoldRequestBytes(c_, raw_req_.Length()));
    BATON_RETURN_IF_ERROR(ParseWireMessage(raw_req_, &req_));
    BATON_ASSIGN_OR_RETURN(OpenAiRequest request, FromProto(req_, c_.limits));
    BATON_ASSIGN_OR_RETURN(BuiltRequest built, BuildRequest(request, *c_.model, "gen", *tenant));
    // gRPC's "no deadline" is a time point centuries away; only a real one is passed on.
    const auto deadline = ctx_.deadline();
    if (deadline < std::chrono::system_clock::now() + std::chrono::hours(24 * 365)) {
      run_options_.deadline = deadline;
    }
    request_id_ = built.response_id;
    record_.worker_request_id = built.generation.request_id;
    run_options_.session = built.generation.session;
    run_options_.trace = built.generation.trace;
    run_options_.arrival = arrival_;
    record_.timings.tokenize_seconds = built.tokenize_seconds;
    BATON_ASSIGN_OR_RETURN(wire_, dispatch::WorkerRequest(built.generation, 0));
    decoder_.emplace(0, c_.model->tokenizer(), built.generation);
    tools_ = ToolCallOutput::ForRequest(request, c_.model->tool_call_format());
    return absl::OkStatus();
  }

  void Deliver(const dispatch::ChoiceDelta& d) {
    const Clock::time_point now = Clock::now();
    if (!d.token_ids.empty()) {
      if (last_token_ == Clock::time_point()) {
        record_.timings.time_to_first_token_seconds = Seconds(now - arrival_);
        c_.metrics->ObserveTimeToFirstToken(record_.timings.time_to_first_token_seconds);
      } else {
        c_.metrics->ObserveInterTokenSeconds(Seconds(now - last_token_));
      }
      last_token_ = now;
    }
    if (d.finished) {
      c_.metrics->ObserveFinished(d.prompt_tokens, d.cached_tokens, d.completion_tokens,
                                  Seconds(now - arrival_),
                                  record_.timings.time_to_first_token_seconds);
      record_.prompt_tokens = d.prompt_tokens;
      record_.cached_tokens = d.cached_tokens;
      record_.completion_tokens = d.completion_tokens;
      RequestTimings& t = record_.timings;
      t.queue_seconds = d.queue_seconds;
      t.prefill_seconds = d.prefill.seconds;
      t.prefill_queue_seconds = d.prefill.queue_seconds;
      t.prefill_compute_seconds = d.prefill.compute_seconds;
      t.kv_transfer_seconds = d.prefill.kv_transfer_seconds;
    }
    if (client_gone_) return;
    if (!has_pending_) {
      pending_.Clear();
      pending_.set_request_id(request_id_);
      has_pending_ = true;
    }
    if (tools_ != nullptr) {
      // The text becomes content and tool calls (tool_call_output.h).
      ChoiceOut shown;
      if (d.finished) shown.finish_reason = d.finish_reason;
      tools_->Feed(d.text, &shown);
      if (d.finished) tools_->Finish(&shown);
      dispatch::ChoiceDelta content = d;
      content.text = std::move(shown.text);
      if (d.finished) content.finish_reason = *shown.finish_reason;
      Append(content, &pending_);
      for (const ToolCallOut& call : shown.tool_calls) {
        pb::ToolCall* out = pending_.add_tool_calls();
        out->set_index(call.index);
        out->set_id(call.id);
        out->set_name(call.name);
        out->set_arguments(call.arguments);
      }
    } else {
      Append(d, &pending_);
    }
    if (d.finished) {
      const RequestTimings& r = record_.timings;
      pb::Timings* t = pending_.mutable_timings();
      t->set_tokenize_seconds(r.tokenize_seconds);
      t->set_route_seconds(r.route_seconds);
      t->set_prefill_seconds(r.prefill_seconds);
      t->set_prefill_queue_seconds(r.prefill_queue_seconds);
      t->set_prefill_compute_seconds(r.prefill_compute_seconds);
      t->set_kv_transfer_seconds(r.kv_transfer_seconds);
      t->set_time_to_first_token_seconds(r.time_to_first_token_seconds);
      t->set_total_seconds(Seconds(now - arrival_));
      if (d.trace != nullptr) {
        dispatch::CompleteTrace({.tokenizer = c_.model->tokenizer().get(),
                                 .model = c_.model->name(),
                                 .prompt_ids = trace_prompt_,
                                 .route = route_explanation_,
                                 .route_seconds = r.route_seconds,
                                 .rerouted = run_ != nullptr && run_->rerouted(),
                                 .model_info = &c_.model->worker_info(),
                                 .params = &trace_params_,
                                 .tokenize_seconds = r.tokenize_seconds,
                                 .time_to_first_token_seconds = r.time_to_first_token_seconds,
                                 .total_seconds = Seconds(now - arrival_),
                                 .queue_seconds = d.queue_seconds,
                                 .cached_tokens = d.cached_tokens,
                                 .completion_tokens = d.completion_tokens},
                                d.trace.get());
        *pending_.mutable_trace() = *d.trace;
      }
    }
    Advance();
  }

  // The run's last act: the call may be deleted here.
  void OnRunDone(const absl::Status& s) {
    worker_done_ = true;
    final_status_ = s;
    Advance();
    MaybeDelete();
  }

  // Starts the next write or, once the worker's side is over, the finish.
  void Advance() {
    if (writing_ || finishing_) return;
    if (has_pending_) {
      in_flight_.Swap(&pending_);
      has_pending_ = false;
      // Our own message always serializes.
      BATON_CHECK(SerializeWireMessage(in_flight_, &out_).ok());
      writing_ = true;
      responder_.Write(out_, &write_step_);
    } else if (final_status_.has_value()) {
      finishing_ = true;
      finish_status_ = ToGrpcFieldName(*final_status_);
      // An overloaded or workerless router asks the client to come back (gRPC's retry
      // pushback, the counterpart of HTTP's Retry-After).
      if (absl::IsUnavailable(finish_status_) || absl::IsResourceExhausted(finish_status_)) {
        ctx_.AddTrailingMetadata("grpc-retry-pushback-ms", "1000");
      }
      responder_.Finish(service::ToGrpcStatus(finish_status_), &finish_step_);
    }
  }

  void OnWrite(bool ok) {
    writing_ = false;
    if (!ok) {  // the client went away: drop what is gathered and stop the worker
      client_gone_ = true;
      has_pending_ = false;
      run_->Cancel();
    }
    Advance();
  }

  void OnFinish(bool /*ok*/) {
    finished_ = true;
    MaybeDelete();
  }

  void OnClientDone(bool /*ok*/) {
    done_seen_ = true;
    if (ctx_.IsCancelled()) {  // a cancel or the deadline; after a normal finish it is false
      client_cancelled_ = true;
      if (run_ != nullptr) run_->Cancel();
    }
    MaybeDelete();
  }

  void MaybeDelete() {
    if (!done_seen_ || !finished_ || (worker_started_ && !worker_done_)) return;
    c_.metrics->running().Decrement();
    c_.metrics->CountRequest("grpc", "Generate", absl::StatusCodeToString(finish_status_.code()));
    c_.metrics->ObserveRequestSeconds("Generate", Seconds(Clock::now() - arrival_));
    if (client_cancelled_ && !finish_status_.ok()) c_.metrics->CountClientCancel();
    if (c_.request_log != nullptr && c_.request_log->enabled()) {
      record_.api = "grpc";
      record_.request_id = request_id_;
      record_.status = absl::StatusCodeToString(finish_status_.code());
      if (run_ != nullptr) {
        const dispatch::Route& route = run_->route();
        record_.worker = route.decode->target();
        if (route.prefill != nullptr) record_.prefill_worker = route.prefill->target();
        record_.rerouted = run_->rerouted();
      }
      record_.timings.total_seconds = Seconds(Clock::now() - arrival_);
      c_.request_log->Write(record_);
    }
    Delete();
  }

  void Delete() {
    ApiLoopState* state = state_;
    delete this;
    state->live_calls.fetch_sub(1);
  }

  const GrpcApiContext& c_;
  AsyncGenerateService* service_;
  grpc::ServerCompletionQueue* cq_;
  ApiLoopState* state_;

  grpc::ServerContext ctx_;
  pb::GenerateRequest req_;
  grpc::ServerAsyncWriter<grpc::ByteBuffer> responder_;
  grpc::ByteBuffer raw_req_;                              // the request's bytes (ParseWireMessage)
  std::optional<service::ByteBudget::Lease> body_lease_;  // raw_req_'s share of c_.bodies
  grpc::ByteBuffer out_;  // in_flight_, serialized; gRPC's until the write completes
  Clock::time_point arrival_;
  Clock::time_point last_token_;
  std::string request_id_;
  RequestRecord record_;  // the latency breakdown, and the --log-requests line
  std::optional<dispatch::ChoiceDecoder> decoder_;
  std::unique_ptr<ToolCallOutput> tools_;  // chat with tools; null: the text is content

  // Built by Prepare, moved into the run.
  ipb::GenerateRequest wire_;
  dispatch::RunOptions run_options_;
  std::unique_ptr<dispatch::RequestRun> run_;  // null until the request is routed
  // A traced request: what CompleteTrace needs beside the final delta.
  std::shared_ptr<const baton::v1::RouteTrace> route_explanation_;
  std::vector<int32_t> trace_prompt_;
  ipb::SamplingParams trace_params_;

  pb::GenerateResponse pending_;    // deltas gathered while a write is in flight
  pb::GenerateResponse in_flight_;  // the message being written (as out_)
  bool has_pending_ = false;
  bool writing_ = false;
  std::optional<absl::Status> final_status_;  // how the call ends, once known
  absl::Status finish_status_;

  bool worker_started_ = false;
  bool worker_done_ = false;
  bool finishing_ = false;  // Finish was called
  bool finished_ = false;   // and completed
  bool done_seen_ = false;  // the AsyncNotifyWhenDone tag came back
  bool client_cancelled_ = false;
  bool client_gone_ = false;

  using Step = dispatch::MemberTag<GenerateCall>;
  Step accept_step_{this, &GenerateCall::OnAccept};
  Step done_step_{this, &GenerateCall::OnClientDone};
  Step write_step_{this, &GenerateCall::OnWrite};
  Step finish_step_{this, &GenerateCall::OnFinish};
};

}  // namespace

void StartGenerateCalls(const GrpcApiContext* context, AsyncGenerateService* service,
                        dispatch::CompletionLoops* loops, ApiLoopState* state) {
  for (int i = 0; i < loops->size(); ++i) {
    (new GenerateCall(context, service, loops->server_queue(i), state))->Listen();
  }
}

}  // namespace baton::frontdoor
