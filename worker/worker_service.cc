#include "worker/worker_service.h"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "common/log.h"
#include "common/strings.h"
#include "kvcache/block_hash.h"
#include "kvcache/kv_event_proto.h"
#include "model/weight_inventory.h"
#include "service/grpc_status.h"
#include "worker/step_trace_proto.h"
#include "worker/worker_drain.h"

namespace baton::worker {

using service::ToGrpcStatus;
namespace {

namespace pb = ::baton::internal::v1;

void SetGroup(const capacity::TensorGroup& g, pb::TensorGroup* out) {
  out->set_bytes(g.bytes);
  out->set_elements(g.elements);
}

// What the router's capacity panel plans from: the whole model's shape and weight groups.
void SetCapacityInputs(const model::Model& m, pb::GetModelInfoResponse* out) {
  const capacity::ModelShape s = model::ShapeOf(m.config());
  pb::ModelShape* shape = out->mutable_shape();
  shape->set_layers(s.layers);
  shape->set_heads(s.heads);
  shape->set_kv_heads(s.kv_heads);
  shape->set_head_dim(s.head_dim);
  shape->set_hidden_size(s.hidden);
  shape->set_intermediate_size(s.intermediate);
  shape->set_vocab_size(s.vocab);
  shape->set_context_length(s.context);
  const capacity::WeightInventory& w = m.weight_inventory();
  pb::WeightGroups* groups = out->mutable_weight_groups();
  SetGroup(w.attn_q_o, groups->mutable_attn_q_o());
  SetGroup(w.attn_k_v, groups->mutable_attn_k_v());
  SetGroup(w.mlp, groups->mutable_mlp());
  SetGroup(w.embedding, groups->mutable_embedding());
  SetGroup(w.lm_head, groups->mutable_lm_head());
  groups->set_other_bytes(w.other_bytes);
  groups->set_tied(w.tied);
  // A pipeline stage past the first holds no layer 0; its leader (stage 0) always does.
  const model::Weights& weights = m.weights();
  for (const model::LayerWeights& l : weights.layers) {
    if (l.q.weight.data == nullptr) continue;
    out->set_weight_dtype(cpu::DTypeName(l.q.weight.dtype));
    break;
  }
}

// Bounds on what one request may carry before the engine's own checks.
constexpr int kMaxPromptIds = 1 << 20;
constexpr size_t kMaxRequestIdBytes = 256;
constexpr size_t kMaxCacheSaltBytes = 1024;
// The grammar compiler bounds a schema at 64 KiB too (grammar::SchemaLimits).
constexpr size_t kMaxJsonSchemaBytes = 64 * 1024;
constexpr uint32_t kMaxAwaitKvTransferMs = 600000;

// Appends one event to a message: several events of one stream travel in one message when
// the client reads slower than the engine steps. Token ids, text and logprobs concatenate;
// the usage and timings of the first and the final event carry over.
// A traced request's steps move by `trace_offset` seconds: from the call's arrival to the
// engine's Submit.
void AppendToProto(const engine::TokenEvent& e, double trace_offset, pb::GenerateResponse* out) {
  out->mutable_token_ids()->Add(e.token_ids.begin(), e.token_ids.end());
  AppendStepTraces(e.trace_steps, trace_offset, out->mutable_trace_steps());
  if (e.trace_truncated) out->set_trace_truncated(true);
  out->mutable_text()->append(e.text);
  for (const engine::SampledToken& t : e.logprobs) {
    pb::TokenLogprob* lp = out->add_logprobs();
    lp->set_token_id(t.id);
    lp->set_logprob(t.logprob);
    for (const auto& [id, logprob] : t.top_logprobs) {
      pb::TopLogprob* top = lp->add_top();
      top->set_token_id(id);
      top->set_logprob(logprob);
    }
  }
  out->set_seconds_since_arrival(e.seconds_since_arrival);
  if (e.usage.prompt_tokens > 0) {  // the first event, and the last
    out->mutable_usage()->set_prompt_tokens(e.usage.prompt_tokens);
    out->mutable_usage()->set_cached_tokens(e.usage.cached_tokens);
    out->mutable_timings()->set_queue_seconds(e.timings.queue_seconds);
    out->mutable_timings()->set_time_to_first_token_seconds(e.timings.time_to_first_token_seconds);
  }
  if (!e.finished) return;
  out->set_finished(true);
  out->set_finish_reason(std::string(engine::FinishReasonName(e.finish_reason)));
  out->set_stop_reason(e.stop_reason);
  out->mutable_usage()->set_prompt_tokens(e.usage.prompt_tokens);
  out->mutable_usage()->set_cached_tokens(e.usage.cached_tokens);
  out->mutable_usage()->set_completion_tokens(e.usage.completion_tokens);
  out->mutable_timings()->set_queue_seconds(e.timings.queue_seconds);
  out->mutable_timings()->set_time_to_first_token_seconds(e.timings.time_to_first_token_seconds);
  out->mutable_timings()->set_total_seconds(e.timings.total_seconds);
  out->mutable_timings()->set_num_preemptions(e.timings.num_preemptions);
}

}  // namespace

absl::StatusOr<engine::EngineRequest> FromProto(const pb::GenerateRequest& in) {
  if (in.request_id().size() > kMaxRequestIdBytes) {
    return absl::InvalidArgumentError(StrCat("request_id is ", in.request_id().size(),
                                             " bytes; the limit is ", kMaxRequestIdBytes));
  }
  if (in.cache_salt().size() > kMaxCacheSaltBytes) {
    return absl::InvalidArgumentError(StrCat("cache_salt is ", in.cache_salt().size(),
                                             " bytes; the limit is ", kMaxCacheSaltBytes));
  }
  if (in.kv_transfer_id().size() > kMaxRequestIdBytes) {
    return absl::InvalidArgumentError(StrCat("kv_transfer_id is ", in.kv_transfer_id().size(),
                                             " bytes; the limit is ", kMaxRequestIdBytes));
  }
  if (in.await_kv_transfer_ms() > kMaxAwaitKvTransferMs) {
    return absl::InvalidArgumentError(StrCat("await_kv_transfer_ms is ", in.await_kv_transfer_ms(),
                                             "; the limit is ", kMaxAwaitKvTransferMs));
  }
  if (in.await_kv_transfer_ms() > 0 && in.kv_transfer_id().empty()) {
    return absl::InvalidArgumentError("await_kv_transfer_ms needs a kv_transfer_id to wait for");
  }
  if (in.prompt_ids_size() > kMaxPromptIds) {
    return absl::InvalidArgumentError(
        StrCat("prompt_ids has ", in.prompt_ids_size(), " ids; the limit is ", kMaxPromptIds));
  }
  if (in.output_ids_size() > kMaxPromptIds) {
    return absl::InvalidArgumentError(
        StrCat("output_ids has ", in.output_ids_size(), " ids; the limit is ", kMaxPromptIds));
  }
  engine::EngineRequest r;
  r.id = in.request_id();
  r.prompt_ids.assign(in.prompt_ids().begin(), in.prompt_ids().end());
  r.output_ids.assign(in.output_ids().begin(), in.output_ids().end());
  r.priority = in.priority();
  r.cache_salt = in.cache_salt();
  r.detokenize = in.detokenize();
  r.kv_transfer_id = in.kv_transfer_id();
  r.trace = in.trace();
  const pb::SamplingParams& p = in.params();
  engine::SamplingParams& s = r.params;
  if (p.has_temperature()) s.temperature = p.temperature();
  if (p.has_top_k()) s.top_k = p.top_k();
  if (p.has_top_p()) s.top_p = p.top_p();
  if (p.has_min_p()) s.min_p = p.min_p();
  if (p.has_repetition_penalty()) s.repetition_penalty = p.repetition_penalty();
  if (p.has_presence_penalty()) s.presence_penalty = p.presence_penalty();
  if (p.has_frequency_penalty()) s.frequency_penalty = p.frequency_penalty();
  for (const auto& [id, bias] : p.logit_bias()) s.logit_bias.emplace_back(id, bias);
  std::sort(s.logit_bias.begin(), s.logit_bias.end());  // map order is unspecified
  if (p.has_seed()) s.seed = p.seed();
  if (p.has_logprobs()) s.logprobs = p.logprobs();
  if (p.has_max_tokens()) s.max_tokens = p.max_tokens();
  s.stop_token_ids.assign(p.stop_token_ids().begin(), p.stop_token_ids().end());
  s.stop.assign(p.stop().begin(), p.stop().end());
  s.ignore_eos = p.ignore_eos();
  s.include_stop_str_in_output = p.include_stop_str_in_output();
  if (p.constraint().has_json_schema()) {
    if (p.constraint().json_schema().size() > kMaxJsonSchemaBytes) {
      return absl::InvalidArgumentError(StrCat("params.constraint.json_schema is ",
                                               p.constraint().json_schema().size(),
                                               " bytes; the limit is ", kMaxJsonSchemaBytes));
    }
    s.constraint.kind = engine::OutputConstraint::Kind::kJsonSchema;
    s.constraint.json_schema = p.constraint().json_schema();
  } else if (p.constraint().json_object()) {
    s.constraint.kind = engine::OutputConstraint::Kind::kJsonObject;
  }
  return r;  // the engine's Submit checks every value against the model and the limits
}

// One Generate call, without a thread of its own: the engine thread's Push wakes it
// (RequestStream::SetListener), it writes whatever events are queued as one message, and
// each write's completion sends what queued meanwhile. So a stream costs no thread and no
// polling, and a client that reads slowly gets several steps per message instead of a
// growing backlog of messages.
//
// A decode stream opened before its KV transfer completed first waits for it
// (AwaitTransfer, KvReceiver::ClaimWhenComplete) without a thread: the call that settles
// the transfer submits the request.
class GenerateReactor final : public grpc::ServerWriteReactor<pb::GenerateResponse> {
 public:
  // `arrived`: when the call reached this worker (a traced request's clock starts there).
  GenerateReactor(engine::Engine* engine, WorkerDrain* drain,
                  std::chrono::steady_clock::time_point arrived)
      : engine_(engine), drain_(drain), arrived_(arrived) {}

  // Streams `stream`'s events; the listener may call back at once. `submitted`: taken just
  // before the engine's Submit, so that no step is placed later than it ran.
  void Start(std::shared_ptr<engine::RequestStream> stream,
             std::chrono::steady_clock::time_point submitted) {
    trace_offset_ = std::max(0.0, std::chrono::duration<double>(submitted - arrived_).count());
    drain_->live.AddGenerate(stream->id());
    {
      std::lock_guard<std::mutex> lock(mu_);
      stream_ = stream;
    }
    stream->SetListener([this] { Pump(/*write_done=*/false); });
  }

  // Waits up to `wait` for `request`'s transfer, then submits it (or ends with the reason
  // the transfer never completed).
  void AwaitTransfer(KvReceiver* receiver, engine::EngineRequest request, absl::Duration wait) {
    receiver_ = receiver;
    transfer_id_ = request.kv_transfer_id;
    request_ = std::move(request);
    {
      std::lock_guard<std::mutex> lock(mu_);
      waiting_ = true;
    }
    receiver_->ClaimWhenComplete(transfer_id_, wait,
                                 [this](absl::Status claimed) { OnClaimed(std::move(claimed)); });
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      // The client is gone: stop the work (NotFound if it just finished).
      (void)engine_->Cancel(stream_->id());  // writes come after Start: stream_ is set
      std::lock_guard<std::mutex> lock(mu_);
      writing_ = false;
      client_gone_ = true;
      FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "the call was cancelled"));
      return;
    }
    Pump(/*write_done=*/true);
  }

  void OnCancel() override {
    std::shared_ptr<engine::RequestStream> stream;
    bool waiting = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      client_gone_ = true;
      stream = stream_;
      waiting = waiting_;
    }
    // Still waiting for the transfer: unless its settling call has begun (OnClaimed then
    // sees client_gone_), nothing else will end the call.
    if (waiting && receiver_->CancelWait(transfer_id_)) {
      std::lock_guard<std::mutex> lock(mu_);
      waiting_ = false;
      FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "the call was cancelled"));
      return;
    }
    if (stream != nullptr) (void)engine_->Cancel(stream->id());  // never under mu_
    std::lock_guard<std::mutex> lock(mu_);
    if (!writing_ && !waiting_) {
      FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "the call was cancelled"));
    }
  }

  void OnDone() override {
    std::shared_ptr<engine::RequestStream> stream;
    bool ended = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stream = stream_;
      ended = ended_;
    }
    if (stream != nullptr) {
      stream->SetListener(nullptr);  // waits for a listener call in progress
      if (!ended) (void)engine_->Cancel(stream->id());
      drain_->live.RemoveGenerate(stream->id());
    }
    delete this;
  }

 private:
  // Sends what is queued unless a write is in flight (its completion calls again).
  void Pump(bool write_done) {
    std::lock_guard<std::mutex> lock(mu_);
    if (write_done) writing_ = false;
    if (writing_ || finishing_ || waiting_) return;
    if (client_gone_) {
      FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "the call was cancelled"));
      return;
    }
    if (pending_error_) {  // the events before a failure went out first
      FinishLocked(*pending_error_);
      return;
    }
    batch_.clear();
    if (stream_->TakeAll(&batch_) == 0) return;
    out_.Clear();
    for (const engine::TokenEvent& e : batch_) {
      if (e.finished) ended_ = true;
      if (e.finished && !e.status.ok()) {
        pending_error_ = ToGrpcStatus(drain_->Explain(e.status));
        break;
      }
      AppendToProto(e, trace_offset_, &out_);
      if (e.finished) final_written_ = true;
    }
    if (out_.token_ids_size() == 0 && !out_.finished()) {
      if (pending_error_) FinishLocked(*pending_error_);
      return;
    }
    writing_ = true;
    if (final_written_) {
      finishing_ = true;
      StartWriteAndFinish(&out_, grpc::WriteOptions(), grpc::Status::OK);
    } else {
      StartWrite(&out_);
    }
  }

  // The transfer settled: `claimed` OK when this call now owns its pages. waiting_ stays
  // set until the end, so that neither OnCancel nor the listener's Pump can finish the
  // call (and so delete it) while this runs; its last act is the Pump that hands over.
  void OnClaimed(absl::Status claimed) {
    bool gone = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      gone = client_gone_;
    }
    if (claimed.ok() && gone) (void)engine_->ReleaseKv(transfer_id_);
    if (!claimed.ok() || gone) {
      std::lock_guard<std::mutex> lock(mu_);
      waiting_ = false;
      FinishLocked(gone ? grpc::Status(grpc::StatusCode::CANCELLED, "the call was cancelled")
                        : ToGrpcStatus(claimed));
      return;
    }
    const auto submitted = std::chrono::steady_clock::now();
    absl::StatusOr<std::shared_ptr<engine::RequestStream>> stream =
        engine_->Submit(std::move(request_));
    if (!stream.ok()) {
      (void)engine_->ReleaseKv(transfer_id_);  // the claim ended the transfer's lease
      std::lock_guard<std::mutex> lock(mu_);
      waiting_ = false;
      FinishLocked(ToGrpcStatus(stream.status()));
      return;
    }
    const std::string id = (*stream)->id();
    Start(*std::move(stream), submitted);
    {
      std::lock_guard<std::mutex> lock(mu_);
      waiting_ = false;
      gone = client_gone_;
    }
    // A cancel that came while this was submitting found no stream to cancel.
    if (gone) (void)engine_->Cancel(id);
    Pump(/*write_done=*/false);
  }

  void FinishLocked(grpc::Status status) {
    if (finishing_) return;
    finishing_ = true;
    Finish(std::move(status));
  }

  engine::Engine* const engine_;
  WorkerDrain* const drain_;
  const std::chrono::steady_clock::time_point arrived_;  // the call's
  double trace_offset_ = 0;                        // the call's arrival to the engine's Submit
  std::shared_ptr<engine::RequestStream> stream_;  // set once, under mu_
  // AwaitTransfer's; written before the wait starts.
  KvReceiver* receiver_ = nullptr;
  std::string transfer_id_;
  engine::EngineRequest request_;
  std::mutex mu_;
  bool waiting_ = false;      // for the transfer; no stream yet
  bool writing_ = false;      // a message is in flight; OnWriteDone follows
  bool finishing_ = false;    // Finish was called (at most once)
  bool client_gone_ = false;  // cancelled, or a write failed
  bool ended_ = false;        // the engine's final event was taken
  bool final_written_ = false;
  std::optional<grpc::Status> pending_error_;
  std::vector<engine::TokenEvent> batch_;
  pb::GenerateResponse out_;  // must stay put until its write completes
};

// A streaming call that fails before it reaches the engine.
template <class Response>
class FailedWrite final : public grpc::ServerWriteReactor<Response> {
 public:
  explicit FailedWrite(grpc::Status status) { this->Finish(std::move(status)); }
  void OnDone() override { delete this; }
};
using FailedGenerate = FailedWrite<pb::GenerateResponse>;

class WorkerService::WorkerImpl final
    : public pb::Worker::WithCallbackMethod_Generate<pb::Worker::Service> {
 public:
  WorkerImpl(engine::Engine* engine, KvReceiver* receiver, KvSender* sender, std::string role,
             std::shared_ptr<const service::InternalAuth> auth)
      : engine_(engine),
        receiver_(receiver),
        sender_(sender),
        role_(std::move(role)),
        auth_(std::move(auth)) {}

  grpc::ServerWriteReactor<pb::GenerateResponse>* Generate(
      grpc::CallbackServerContext* ctx, const pb::GenerateRequest* req) override {
    const auto arrived = std::chrono::steady_clock::now();
    if (grpc::Status auth = auth_->Check(*ctx); !auth.ok()) return new FailedGenerate(auth);
    if (drain_.state.draining()) return new FailedGenerate(WorkerDrain::Refusal());
    absl::StatusOr<engine::EngineRequest> request = FromProto(*req);
    if (!request.ok()) return new FailedGenerate(ToGrpcStatus(request.status()));
    const std::string transfer_id = request->kv_transfer_id;
    if (!transfer_id.empty()) {
      if (receiver_ == nullptr) {
        return new FailedGenerate(
            grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                         StrCat("this worker (role ", role_,
                                ") does not receive KV transfers; send kv_transfer_id to a "
                                "decode worker")));
      }
      if (req->await_kv_transfer_ms() > 0) {
        auto* reactor = new GenerateReactor(engine_, &drain_, arrived);
        reactor->AwaitTransfer(receiver_, *std::move(request),
                               absl::Milliseconds(req->await_kv_transfer_ms()));
        return reactor;
      }
      if (absl::Status claimed = receiver_->Claim(transfer_id); !claimed.ok()) {
        return new FailedGenerate(ToGrpcStatus(claimed));
      }
    }
    const auto submitted = std::chrono::steady_clock::now();
    absl::StatusOr<std::shared_ptr<engine::RequestStream>> stream =
        engine_->Submit(*std::move(request));
    if (!stream.ok()) {
      // The claim ended the transfer's lease: free its pages here.
      if (!transfer_id.empty()) (void)engine_->ReleaseKv(transfer_id);
      return new FailedGenerate(ToGrpcStatus(stream.status()));
    }
    auto* reactor = new GenerateReactor(engine_, &drain_, arrived);
    reactor->Start(*std::move(stream), submitted);
    return reactor;
  }

  grpc::Status Prefill(grpc::ServerContext* ctx, const pb::PrefillRequest* req,
                       pb::PrefillResponse* out) override {
    if (grpc::Status auth = auth_->Check(*ctx); !auth.ok()) return auth;
    if (sender_ == nullptr) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          StrCat("this worker (role ", role_,
                                 ") does not send KV transfers; send Prefill to a prefill "
                                 "worker"));
    }
    if (drain_.state.draining()) return WorkerDrain::Refusal();
    drain_.live.AddPrefill();
    absl::StatusOr<pb::PrefillResponse> done =
        sender_->Run(*req, [this, ctx] { return ctx->IsCancelled() || drain_.state.expired(); });
    drain_.live.RemovePrefill();
    if (!done.ok()) done = drain_.Explain(done.status());
    if (!done.ok()) {
      // Operators see why a transfer failed here; the router sees the status.
      if (done.status().code() != absl::StatusCode::kCancelled) {
        LogWarn("baton worker: prefill of '%s' for %s failed: %s",
                req->request().request_id().c_str(), req->decode_worker().c_str(),
                std::string(done.status().message()).c_str());
      }
      return ToGrpcStatus(done.status());
    }
    *out = *std::move(done);
    return grpc::Status::OK;
  }

  grpc::Status GetStats(grpc::ServerContext* ctx, const pb::GetStatsRequest*,
                        pb::GetStatsResponse* out) override {
    if (grpc::Status auth = auth_->Check(*ctx); !auth.ok()) return auth;
    const engine::EngineStats s = engine_->Stats();
    out->set_running(s.running);
    out->set_waiting(s.waiting);
    out->set_pages_total(s.pages_total);
    out->set_pages_used(s.pages_used);
    out->set_pages_free(s.pages_free);
    out->set_pages_cached(s.pages_cached);
    out->set_prefix_queried_tokens(s.prefix_queried_tokens);
    out->set_prefix_hit_tokens(s.prefix_hit_tokens);
    out->set_preemptions(s.preemptions);
    out->set_requests_finished(s.requests_finished);
    out->set_requests_cancelled(s.requests_cancelled);
    out->set_requests_failed(s.requests_failed);
    out->set_generated_tokens(s.generated_tokens);
    out->set_kv_reservations(s.kv_reservations);
    out->set_kv_pages_reserved(s.kv_pages_reserved);
    out->set_kv_transfers_admitted(s.kv_transfers_admitted);
    return grpc::Status::OK;
  }

  grpc::Status GetModelInfo(grpc::ServerContext* ctx, const pb::GetModelInfoRequest*,
                            pb::GetModelInfoResponse* out) override {
    if (grpc::Status auth = auth_->Check(*ctx); !auth.ok()) return auth;
    const engine::LoadedModel& m = engine_->model();
    const model::ModelConfig& config = m.model->config();
    out->set_model_id(engine_->options().model_id.empty() ? m.name : engine_->options().model_id);
    out->set_architecture(config.architecture);
    out->set_max_model_len(engine_->scheduler_config().max_model_len);
    out->set_vocab_size(static_cast<int32_t>(config.vocab_size));
    out->set_block_size(engine_->options().block_size);
    out->mutable_eos_token_ids()->Add(m.eos_token_ids.begin(), m.eos_token_ids.end());
    out->set_block_hash_spec_version(kvcache::kBlockHashSpecVersion);
    out->set_role(role_);
    out->set_weight_bytes(m.model->weight_bytes());
    out->set_kv_bytes_per_token(static_cast<uint64_t>(engine_->kv_bytes_per_token()));
    out->set_num_layers(static_cast<int32_t>(engine_->kv_layout().num_layers));
    SetCapacityInputs(*m.model, out);
    out->set_kv_cache_dtype(engine_->options().kv_cache_dtype);
    return grpc::Status::OK;
  }

 private:
  engine::Engine* engine_;
  KvReceiver* receiver_;
  KvSender* sender_;
  std::string role_;
  std::shared_ptr<const service::InternalAuth> auth_;

 public:
  engine::Engine* engine() const { return engine_; }
  WorkerDrain drain_;  // WorkerService's drain calls reach it
};

// One KV event subscription, without a thread: the publisher's callback queues a batch
// and starts a write unless one is in flight, whose completion sends the next.
class SubscribeReactor final : public grpc::ServerWriteReactor<pb::KvEventBatch> {
 public:
  SubscribeReactor(kvcache::KvEventPublisher* events, uint64_t after)
      : events_(events), after_(after) {}

  // After the constructor: the publisher may call back at once.
  void Start() {
    const uint64_t id = events_->Subscribe([this](const kvcache::KvEventBatch& batch) {
      if (batch.sequence <= after_) return;
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(batch);
      PumpLocked();
    });
    std::lock_guard<std::mutex> lock(mu_);
    id_ = id;
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mu_);
    writing_ = false;
    if (!ok) {
      FinishLocked();
      return;
    }
    PumpLocked();
  }

  void OnCancel() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!writing_) FinishLocked();
    cancelled_ = true;
  }

  void OnDone() override {
    uint64_t id = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      id = id_;
    }
    events_->Unsubscribe(id);  // waits for a delivery in progress
    delete this;
  }

 private:
  void PumpLocked() {
    if (writing_ || finishing_) return;
    if (cancelled_) {
      FinishLocked();
      return;
    }
    if (queue_.empty()) return;
    out_.Clear();
    kvcache::ToProto(queue_.front(), &out_);
    queue_.pop_front();
    writing_ = true;
    StartWrite(&out_);
  }

  void FinishLocked() {
    if (finishing_) return;
    finishing_ = true;
    Finish(grpc::Status::OK);
  }

  kvcache::KvEventPublisher* const events_;
  const uint64_t after_;
  std::mutex mu_;
  uint64_t id_ = 0;
  bool writing_ = false;
  bool finishing_ = false;
  bool cancelled_ = false;
  std::deque<kvcache::KvEventBatch> queue_;
  pb::KvEventBatch out_;  // must stay put until its write completes
};

class WorkerService::KvEventsImpl final
    : public pb::KvEvents::WithCallbackMethod_Subscribe<pb::KvEvents::Service> {
 public:
  KvEventsImpl(engine::Engine* engine, std::shared_ptr<const service::InternalAuth> auth)
      : engine_(engine), auth_(std::move(auth)) {}

  // Streams every batch published after the call starts (and after after_sequence). A
  // subscriber that needs the state first takes a snapshot after subscribing and skips
  // batches up to the snapshot's sequence.
  grpc::ServerWriteReactor<pb::KvEventBatch>* Subscribe(
      grpc::CallbackServerContext* ctx, const pb::SubscribeKvEventsRequest* req) override {
    if (grpc::Status auth = auth_->Check(*ctx); !auth.ok())
      return new FailedWrite<pb::KvEventBatch>(auth);
    auto* reactor = new SubscribeReactor(&engine_->kv_events(), req->after_sequence());
    reactor->Start();
    return reactor;
  }

  grpc::Status GetSnapshot(grpc::ServerContext* ctx, const pb::GetKvSnapshotRequest*,
                           pb::KvSnapshot* out) override {
    if (grpc::Status auth = auth_->Check(*ctx); !auth.ok()) return auth;
    kvcache::ToProto(engine_->kv_events().Snapshot(), out);
    return grpc::Status::OK;
  }

 private:
  engine::Engine* engine_;
  std::shared_ptr<const service::InternalAuth> auth_;
};

WorkerService::WorkerService(engine::Engine* engine, KvReceiver* receiver, KvSender* sender,
                             std::string role, std::shared_ptr<const service::InternalAuth> auth)
    : worker_(std::make_unique<WorkerImpl>(engine, receiver, sender, std::move(role), auth)),
      kv_events_(std::make_unique<KvEventsImpl>(engine, std::move(auth))) {}

WorkerService::~WorkerService() = default;

grpc::Service* WorkerService::worker() { return worker_.get(); }

void WorkerService::BeginDrain() { worker_->drain_.state.Begin(); }

int64_t WorkerService::live_calls() const { return worker_->drain_.live.size(); }

void WorkerService::ExpireDrain() {
  worker_->drain_.state.Expire();  // before the cancels: their calls' ends read it
  for (const std::string& id : worker_->drain_.live.GenerateIds()) {
    (void)worker_->engine()->Cancel(id);  // NotFound when it just finished
  }
}
grpc::Service* WorkerService::kv_events() { return kv_events_.get(); }

}  // namespace baton::worker
