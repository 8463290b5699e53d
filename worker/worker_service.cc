#include "worker/worker_service.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <utility>

#include "common/strings.h"
#include "kvcache/block_hash.h"
#include "kvcache/kv_event_proto.h"
#include "service/grpc_status.h"

namespace baton::worker {

using service::ToGrpcStatus;
namespace {

namespace pb = ::baton::internal::v1;

// How often a waiting Generate call checks whether its client is still there.
constexpr int64_t kPollMs = 20;
// Bounds on what one request may carry before the engine's own checks.
constexpr int kMaxPromptIds = 1 << 20;
constexpr size_t kMaxRequestIdBytes = 256;
constexpr size_t kMaxCacheSaltBytes = 1024;

void ToProto(const engine::TokenEvent& e, pb::GenerateResponse* out) {
  out->mutable_token_ids()->Add(e.token_ids.begin(), e.token_ids.end());
  out->set_text(e.text);
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
  if (in.prompt_ids_size() > kMaxPromptIds) {
    return absl::InvalidArgumentError(
        StrCat("prompt_ids has ", in.prompt_ids_size(), " ids; the limit is ", kMaxPromptIds));
  }
  engine::EngineRequest r;
  r.id = in.request_id();
  r.prompt_ids.assign(in.prompt_ids().begin(), in.prompt_ids().end());
  r.priority = in.priority();
  r.cache_salt = in.cache_salt();
  r.detokenize = in.detokenize();
  r.kv_transfer_id = in.kv_transfer_id();
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
  return r;  // the engine's Submit checks every value against the model and the limits
}

class WorkerService::WorkerImpl final : public pb::Worker::Service {
 public:
  WorkerImpl(engine::Engine* engine, KvReceiver* receiver, KvSender* sender, std::string role)
      : engine_(engine), receiver_(receiver), sender_(sender), role_(std::move(role)) {}

  grpc::Status Generate(grpc::ServerContext* ctx, const pb::GenerateRequest* req,
                        grpc::ServerWriter<pb::GenerateResponse>* writer) override {
    absl::StatusOr<engine::EngineRequest> request = FromProto(*req);
    if (!request.ok()) return ToGrpcStatus(request.status());
    const std::string transfer_id = request->kv_transfer_id;
    if (!transfer_id.empty()) {
      if (receiver_ == nullptr) {
        return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                            StrCat("this worker (role ", role_,
                                   ") does not receive KV transfers; send kv_transfer_id to a "
                                   "decode worker"));
      }
      if (absl::Status claimed = receiver_->Claim(transfer_id); !claimed.ok()) {
        return ToGrpcStatus(claimed);
      }
    }
    absl::StatusOr<std::shared_ptr<engine::RequestStream>> stream =
        engine_->Submit(*std::move(request));
    if (!stream.ok()) {
      // The claim ended the transfer's lease: free its pages here.
      if (!transfer_id.empty()) (void)engine_->ReleaseKv(transfer_id);
      return ToGrpcStatus(stream.status());
    }
    bool cancelled = false;
    engine::TokenEvent e;
    for (;;) {
      bool timed_out = false;
      if (!(*stream)->NextFor(&e, kPollMs, &timed_out)) {
        if (!timed_out) break;  // the stream ended
        if (!cancelled && ctx->IsCancelled()) {
          cancelled = true;
          (void)engine_->Cancel((*stream)->id());  // NotFound if it just finished
        }
        continue;
      }
      if (e.finished && !e.status.ok()) return ToGrpcStatus(e.status);
      pb::GenerateResponse out;
      ToProto(e, &out);
      if (!cancelled && !writer->Write(out)) {
        // The client is gone: stop the work, then let the stream run out.
        cancelled = true;
        (void)engine_->Cancel((*stream)->id());
      }
      if (e.finished) break;
    }
    if (cancelled) return grpc::Status(grpc::StatusCode::CANCELLED, "the call was cancelled");
    return grpc::Status::OK;
  }

  grpc::Status Prefill(grpc::ServerContext* ctx, const pb::PrefillRequest* req,
                       pb::PrefillResponse* out) override {
    if (sender_ == nullptr) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          StrCat("this worker (role ", role_,
                                 ") does not send KV transfers; send Prefill to a prefill "
                                 "worker"));
    }
    absl::StatusOr<pb::PrefillResponse> done =
        sender_->Run(*req, [ctx] { return ctx->IsCancelled(); });
    if (!done.ok()) {
      // Operators see why a transfer failed here; the router sees the status.
      if (done.status().code() != absl::StatusCode::kCancelled) {
        std::fprintf(stderr, "baton worker: prefill of '%s' for %s failed: %s\n",
                     req->request().request_id().c_str(), req->decode_worker().c_str(),
                     std::string(done.status().message()).c_str());
      }
      return ToGrpcStatus(done.status());
    }
    *out = *std::move(done);
    return grpc::Status::OK;
  }

  grpc::Status GetStats(grpc::ServerContext*, const pb::GetStatsRequest*,
                        pb::GetStatsResponse* out) override {
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

  grpc::Status GetModelInfo(grpc::ServerContext*, const pb::GetModelInfoRequest*,
                            pb::GetModelInfoResponse* out) override {
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
    return grpc::Status::OK;
  }

 private:
  engine::Engine* engine_;
  KvReceiver* receiver_;
  KvSender* sender_;
  std::string role_;
};

class WorkerService::KvEventsImpl final : public pb::KvEvents::Service {
 public:
  explicit KvEventsImpl(engine::Engine* engine) : engine_(engine) {}

  // Streams every batch published after the call starts (and after after_sequence). A
  // subscriber that needs the state first takes a snapshot after subscribing and skips
  // batches up to the snapshot's sequence.
  grpc::Status Subscribe(grpc::ServerContext* ctx, const pb::SubscribeKvEventsRequest* req,
                         grpc::ServerWriter<pb::KvEventBatch>* writer) override {
    struct Queue {
      std::mutex mu;
      std::condition_variable cv;
      std::deque<kvcache::KvEventBatch> batches;
    };
    auto queue = std::make_shared<Queue>();
    const uint64_t after = req->after_sequence();
    const uint64_t id = engine_->kv_events().Subscribe([queue, after](const auto& batch) {
      if (batch.sequence <= after) return;
      {
        std::lock_guard<std::mutex> lock(queue->mu);
        queue->batches.push_back(batch);
      }
      queue->cv.notify_one();
    });
    grpc::Status result = grpc::Status::OK;
    while (!ctx->IsCancelled()) {
      kvcache::KvEventBatch batch;
      {
        std::unique_lock<std::mutex> lock(queue->mu);
        if (!queue->cv.wait_for(lock, std::chrono::milliseconds(kPollMs),
                                [&] { return !queue->batches.empty(); })) {
          continue;
        }
        batch = std::move(queue->batches.front());
        queue->batches.pop_front();
      }
      pb::KvEventBatch out;
      kvcache::ToProto(batch, &out);
      if (!writer->Write(out)) break;
    }
    engine_->kv_events().Unsubscribe(id);
    return result;
  }

  grpc::Status GetSnapshot(grpc::ServerContext*, const pb::GetKvSnapshotRequest*,
                           pb::KvSnapshot* out) override {
    kvcache::ToProto(engine_->kv_events().Snapshot(), out);
    return grpc::Status::OK;
  }

 private:
  engine::Engine* engine_;
};

WorkerService::WorkerService(engine::Engine* engine, KvReceiver* receiver, KvSender* sender,
                             std::string role)
    : worker_(std::make_unique<WorkerImpl>(engine, receiver, sender, std::move(role))),
      kv_events_(std::make_unique<KvEventsImpl>(engine)) {}

WorkerService::~WorkerService() = default;

grpc::Service* WorkerService::worker() { return worker_.get(); }
grpc::Service* WorkerService::kv_events() { return kv_events_.get(); }

}  // namespace baton::worker
