#include "router/grpc_api.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "common/status.h"
#include "common/strings.h"
#include "router/generation.h"
#include "router/request_builder.h"
#include "service/api_key.h"

namespace baton::router {
namespace {

namespace pb = ::baton::v1;
using Clock = std::chrono::steady_clock;

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

std::string CodeName(const absl::Status& s) { return absl::StatusCodeToString(s.code()); }

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

absl::Status CheckChat(const pb::ChatInput& chat, const ProtocolLimits& limits,
                       nlohmann::ordered_json* out) {
  if (chat.messages_size() == 0) {
    return absl::InvalidArgumentError("chat.messages must not be empty");
  }
  if (chat.messages_size() > limits.max_messages) {
    return absl::InvalidArgumentError(StrCat("chat.messages has ", chat.messages_size(),
                                             " messages; the maximum is ", limits.max_messages));
  }
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  for (const pb::ChatMessage& m : chat.messages()) {
    if (m.role().empty()) return absl::InvalidArgumentError("chat.messages[].role is empty");
    messages.push_back({{"role", m.role()}, {"content", m.content()}});
  }
  *out = nlohmann::ordered_json{{"messages", std::move(messages)}};
  return absl::OkStatus();
}

class GrpcApi final : public pb::Baton::Service {
 public:
  explicit GrpcApi(GrpcApiContext c) : c_(std::move(c)) {}

  grpc::Status Generate(grpc::ServerContext* ctx, const pb::GenerateRequest* req,
                        grpc::ServerWriter<pb::GenerateResponse>* writer) override {
    const Clock::time_point arrival = Clock::now();
    c_.metrics->running().Increment();
    absl::Status s = RunGenerate(ctx, *req, writer, arrival);
    c_.metrics->running().Decrement();
    c_.metrics->CountRequest("grpc", "Generate", CodeName(s));
    c_.metrics->ObserveRequestSeconds("Generate", SecondsSince(arrival));
    return ToGrpc(s);
  }

  grpc::Status Tokenize(grpc::ServerContext* ctx, const pb::TokenizeRequest* req,
                        pb::TokenizeResponse* out) override {
    absl::Status s = RunTokenize(ctx, *req, out);
    c_.metrics->CountRequest("grpc", "Tokenize", CodeName(s));
    return ToGrpc(s);
  }

  grpc::Status Detokenize(grpc::ServerContext* ctx, const pb::DetokenizeRequest* req,
                          pb::DetokenizeResponse* out) override {
    absl::Status s = RunDetokenize(ctx, *req, out);
    c_.metrics->CountRequest("grpc", "Detokenize", CodeName(s));
    return ToGrpc(s);
  }

  grpc::Status ListModels(grpc::ServerContext* ctx, const pb::ListModelsRequest*,
                          pb::ListModelsResponse* out) override {
    absl::Status s = CheckAuth(ctx);
    if (s.ok()) FillCard(out->add_models());
    c_.metrics->CountRequest("grpc", "ListModels", CodeName(s));
    return ToGrpc(s);
  }

  grpc::Status ModelInfo(grpc::ServerContext* ctx, const pb::ModelInfoRequest* req,
                         pb::ModelCard* out) override {
    absl::Status s = CheckAuth(ctx);
    if (s.ok()) s = c_.model->CheckModelName(req->model());
    if (s.ok()) FillCard(out);
    c_.metrics->CountRequest("grpc", "ModelInfo", CodeName(s));
    return ToGrpc(s);
  }

 private:
  absl::Status CheckAuth(grpc::ServerContext* ctx) const {
    if (c_.api_key.empty()) return absl::OkStatus();
    const auto& md = ctx->client_metadata();
    auto it = md.find("authorization");
    if (it == md.end()) {
      return absl::UnauthenticatedError(
          "missing API key: send metadata 'authorization: Bearer <key>'");
    }
    if (!service::BearerTokenMatches(std::string_view(it->second.data(), it->second.size()),
                                     c_.api_key)) {
      return absl::UnauthenticatedError("incorrect API key in 'authorization' metadata");
    }
    return absl::OkStatus();
  }

  void FillCard(pb::ModelCard* card) const {
    const auto& info = c_.model->worker_info();
    card->set_id(c_.model->name());
    card->set_owned_by("baton");
    card->set_created(c_.model->created());
    card->set_max_model_len(info.max_model_len());
    card->set_vocab_size(info.vocab_size());
    card->set_block_size(info.block_size());
    card->set_architecture(info.architecture());
    card->mutable_eos_token_ids()->CopyFrom(info.eos_token_ids());
  }

  absl::Status RunGenerate(grpc::ServerContext* ctx, const pb::GenerateRequest& req,
                           grpc::ServerWriter<pb::GenerateResponse>* writer,
                           Clock::time_point arrival) {
    BATON_RETURN_IF_ERROR(CheckAuth(ctx));
    BATON_ASSIGN_OR_RETURN(OpenAiRequest request, FromProto(req, c_.limits));
    BATON_ASSIGN_OR_RETURN(BuiltRequest built, BuildRequest(request, *c_.model, "gen"));
    // gRPC's "no deadline" is a time point centuries away; only a real one is passed on.
    const auto deadline = ctx->deadline();
    if (deadline < std::chrono::system_clock::now() + std::chrono::hours(24 * 365)) {
      built.generation.deadline = deadline;
    }
    const std::string request_id = built.generation.request_id;
    BATON_ASSIGN_OR_RETURN(
        std::unique_ptr<Generation> gen,
        Generation::Start(c_.worker, c_.model->tokenizer(), std::move(built.generation)));
    Generation* g = gen.get();
    const uint64_t watch =
        c_.watcher->Watch([ctx] { return ctx->IsCancelled(); }, [g] { g->Cancel(); });
    absl::Status result = Stream(*g, request_id, built.tokenize_seconds, arrival, writer);
    c_.watcher->Unwatch(watch);
    if (!result.ok() && ctx->IsCancelled()) c_.metrics->CountClientCancel();
    return result;
  }

  absl::Status Stream(Generation& gen, const std::string& request_id, double tokenize_seconds,
                      Clock::time_point arrival, grpc::ServerWriter<pb::GenerateResponse>* writer) {
    ChoiceDelta d;
    bool first = true;
    Clock::time_point last = arrival;
    while (gen.Next(&d)) {
      const Clock::time_point now = Clock::now();
      if (!d.token_ids.empty()) {
        if (first) {
          c_.metrics->ObserveTimeToFirstToken(std::chrono::duration<double>(now - arrival).count());
        } else {
          c_.metrics->ObserveInterTokenSeconds(std::chrono::duration<double>(now - last).count());
        }
        first = false;
        last = now;
      }
      pb::GenerateResponse out;
      out.set_request_id(request_id);
      out.mutable_token_ids()->Add(d.token_ids.begin(), d.token_ids.end());
      out.set_text(d.text);
      for (const TokenLogprob& lp : d.logprobs) {
        pb::TokenLogprob* o = out.add_logprobs();
        o->set_token_id(lp.token_id);
        o->set_token(lp.token);
        o->set_logprob(lp.logprob);
        for (const TopLogprob& t : lp.top) {
          pb::TopLogprob* top = o->add_top();
          top->set_token_id(t.token_id);
          top->set_token(t.token);
          top->set_logprob(t.logprob);
        }
      }
      if (d.finished) {
        out.set_finished(true);
        out.set_finish_reason(d.finish_reason);
        out.set_stop_reason(d.stop_reason);
        out.mutable_usage()->set_prompt_tokens(d.prompt_tokens);
        out.mutable_usage()->set_cached_tokens(d.cached_tokens);
        out.mutable_usage()->set_completion_tokens(d.completion_tokens);
        pb::Timings* t = out.mutable_timings();
        t->set_tokenize_seconds(tokenize_seconds);
        t->set_queue_seconds(d.queue_seconds);
        t->set_time_to_first_token_seconds(d.time_to_first_token_seconds);
        t->set_total_seconds(SecondsSince(arrival));
        t->set_num_preemptions(d.num_preemptions);
        c_.metrics->AddTokens(d.prompt_tokens, d.cached_tokens, d.completion_tokens);
      }
      if (!writer->Write(out)) {
        gen.Cancel();
        return absl::CancelledError("the client went away");
      }
    }
    return gen.status();
  }

  absl::Status RunTokenize(grpc::ServerContext* ctx, const pb::TokenizeRequest& req,
                           pb::TokenizeResponse* out) {
    BATON_RETURN_IF_ERROR(CheckAuth(ctx));
    BATON_RETURN_IF_ERROR(c_.model->CheckModelName(req.model()));
    std::vector<int32_t> ids;
    if (req.has_chat()) {
      nlohmann::ordered_json chat;
      BATON_RETURN_IF_ERROR(CheckChat(req.chat(), c_.limits, &chat));
      BATON_ASSIGN_OR_RETURN(
          ids,
          c_.model->EncodeChat(
              chat,
              req.chat().has_add_generation_prompt() ? req.chat().add_generation_prompt() : true,
              req.has_add_special_tokens() && req.add_special_tokens()));
    } else {
      BATON_ASSIGN_OR_RETURN(
          ids, c_.model->EncodeText(
                   req.text(), req.has_add_special_tokens() ? req.add_special_tokens() : true));
    }
    out->mutable_token_ids()->Add(ids.begin(), ids.end());
    out->set_count(static_cast<int64_t>(ids.size()));
    out->set_max_model_len(c_.model->max_model_len());
    for (int32_t id : ids) out->add_tokens(c_.model->tokenizer()->TokenBytes(id));
    return absl::OkStatus();
  }

  absl::Status RunDetokenize(grpc::ServerContext* ctx, const pb::DetokenizeRequest& req,
                             pb::DetokenizeResponse* out) {
    BATON_RETURN_IF_ERROR(CheckAuth(ctx));
    BATON_RETURN_IF_ERROR(c_.model->CheckModelName(req.model()));
    std::vector<int32_t> ids(req.token_ids().begin(), req.token_ids().end());
    if (ids.size() > c_.limits.max_prompt_token_ids) {
      return absl::InvalidArgumentError(StrCat(
          "token_ids has ", ids.size(), " ids; the maximum is ", c_.limits.max_prompt_token_ids));
    }
    BATON_RETURN_IF_ERROR(c_.model->CheckTokenIds(ids));
    tokenizer::DecodeOptions options;
    options.skip_special_tokens = req.has_skip_special_tokens() ? req.skip_special_tokens() : true;
    BATON_ASSIGN_OR_RETURN(*out->mutable_text(), c_.model->tokenizer()->Decode(ids, options));
    return absl::OkStatus();
  }

  GrpcApiContext c_;
};

}  // namespace

absl::StatusOr<OpenAiRequest> FromProto(const pb::GenerateRequest& in,
                                        const ProtocolLimits& limits) {
  OpenAiRequest r;
  r.kind = OpenAiRequest::Kind::kCompletion;
  r.model = in.model();
  switch (in.input_case()) {
    case pb::GenerateRequest::kText:
      r.prompt_text = in.text();
      break;
    case pb::GenerateRequest::kTokenIds:
      if (static_cast<size_t>(in.token_ids().ids_size()) > limits.max_prompt_token_ids) {
        return absl::InvalidArgumentError(StrCat("token_ids has ", in.token_ids().ids_size(),
                                                 " ids; the maximum is ",
                                                 limits.max_prompt_token_ids));
      }
      r.prompt_ids.emplace(in.token_ids().ids().begin(), in.token_ids().ids().end());
      break;
    case pb::GenerateRequest::kChat:
      r.kind = OpenAiRequest::Kind::kChat;
      BATON_RETURN_IF_ERROR(CheckChat(in.chat(), limits, &r.chat));
      r.add_generation_prompt =
          in.chat().has_add_generation_prompt() ? in.chat().add_generation_prompt() : true;
      break;
    default:
      return absl::InvalidArgumentError("input is missing: set text, chat or token_ids");
  }
  const pb::SamplingParams& s = in.sampling();
  if (s.has_temperature()) r.temperature = s.temperature();
  if (s.has_top_k()) r.top_k = s.top_k();
  if (s.has_top_p()) r.top_p = s.top_p();
  if (s.has_min_p()) r.min_p = s.min_p();
  if (s.has_repetition_penalty()) r.repetition_penalty = s.repetition_penalty();
  if (s.has_presence_penalty()) r.presence_penalty = s.presence_penalty();
  if (s.has_frequency_penalty()) r.frequency_penalty = s.frequency_penalty();
  if (s.has_seed()) r.seed = s.seed();
  if (s.logit_bias_size() > limits.max_logit_bias) {
    return absl::InvalidArgumentError(StrCat("sampling.logit_bias has ", s.logit_bias_size(),
                                             " entries; the maximum is ", limits.max_logit_bias));
  }
  for (const auto& [id, bias] : s.logit_bias()) r.logit_bias.emplace_back(id, bias);
  std::sort(r.logit_bias.begin(), r.logit_bias.end());  // map order is unspecified

  const pb::StopConditions& stop = in.stop();
  if (stop.has_max_tokens()) {
    if (stop.max_tokens() < 1) {
      return absl::InvalidArgumentError(
          StrCat("stop.max_tokens is ", stop.max_tokens(), "; it must be at least 1"));
    }
    r.max_tokens = stop.max_tokens();
  }
  if (stop.stop_size() > limits.max_stop) {
    return absl::InvalidArgumentError(
        StrCat("stop.stop has ", stop.stop_size(), " strings; the maximum is ", limits.max_stop));
  }
  for (const std::string& s : stop.stop()) {
    if (s.empty()) return absl::InvalidArgumentError("stop.stop has an empty string");
    if (s.size() > limits.max_stop_bytes) {
      return absl::InvalidArgumentError(
          StrCat("a stop string is ", s.size(), " bytes; the maximum is ", limits.max_stop_bytes));
    }
    r.stop.push_back(s);
  }
  if (stop.stop_token_ids_size() > limits.max_stop) {
    return absl::InvalidArgumentError(StrCat("stop.stop_token_ids has ", stop.stop_token_ids_size(),
                                             " ids; the maximum is ", limits.max_stop));
  }
  r.stop_token_ids.assign(stop.stop_token_ids().begin(), stop.stop_token_ids().end());
  r.ignore_eos = stop.ignore_eos();
  r.include_stop_str_in_output = stop.include_stop_str_in_output();
  if (in.has_logprobs()) {
    if (in.logprobs() < 0 || in.logprobs() > limits.max_top_logprobs) {
      return absl::InvalidArgumentError(StrCat(
          "logprobs is ", in.logprobs(), "; it must be in [0, ", limits.max_top_logprobs, "]"));
    }
    r.logprobs = in.logprobs();
  }
  r.request_id = in.request_id();
  r.priority = in.priority();
  r.cache_salt = in.cache_salt();
  r.skip_special_tokens = in.has_skip_special_tokens() ? in.skip_special_tokens() : true;
  return r;
}

std::unique_ptr<grpc::Service> MakeGrpcApi(GrpcApiContext context) {
  return std::make_unique<GrpcApi>(std::move(context));
}

}  // namespace baton::router
