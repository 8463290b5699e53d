#include "frontdoor/grpc/grpc_api.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include "common/status.h"
#include "common/strings.h"
#include "frontdoor/grpc/generate_call.h"
#include "frontdoor/grpc/unary_call.h"
#include "frontdoor/grpc/wire_message.h"
#include "frontdoor/openai/structured_request.h"
#include "service/api_key.h"
#include "service/grpc_status.h"

namespace baton::frontdoor {
namespace {

namespace pb = ::baton::v1;

std::string CodeName(const absl::Status& s) { return absl::StatusCodeToString(s.code()); }

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
  for (int i = 0; i < chat.messages_size(); ++i) {
    const pb::ChatMessage& m = chat.messages(i);
    BATON_RETURN_IF_ERROR(CheckMessageRole(m.role(), StrCat("chat.messages[", i, "].role")));
    nlohmann::ordered_json message = {{"role", m.role()}, {"content", m.content()}};
    if (!m.name().empty()) message["name"] = m.name();
    if (!m.tool_call_id().empty()) message["tool_call_id"] = m.tool_call_id();
    if (m.tool_calls_size() > 0) {
      nlohmann::ordered_json calls = nlohmann::ordered_json::array();
      for (int j = 0; j < m.tool_calls_size(); ++j) {
        const pb::ToolCall& call = m.tool_calls(j);
        // Templates want the arguments as an object (as the HTTP API gives them).
        nlohmann::ordered_json args = nlohmann::ordered_json::parse(
            call.arguments().empty() ? std::string("{}") : call.arguments(), nullptr, false);
        if (args.is_discarded()) {
          return absl::InvalidArgumentError(
              StrCat("chat.messages[", i, "].tool_calls[", j, "].arguments is not valid JSON"));
        }
        calls.push_back({{"id", call.id()},
                         {"type", "function"},
                         {"function", {{"name", call.name()}, {"arguments", std::move(args)}}}});
      }
      message["tool_calls"] = std::move(calls);
    }
    messages.push_back(std::move(message));
  }
  *out = nlohmann::ordered_json{{"messages", std::move(messages)}};
  if (chat.tools_size() > 0) {
    nlohmann::ordered_json tools = nlohmann::ordered_json::array();
    for (int i = 0; i < chat.tools_size(); ++i) {
      const pb::Tool& tool = chat.tools(i);
      if (tool.name().empty()) {
        return absl::InvalidArgumentError(StrCat("chat.tools[", i, "].name must not be empty"));
      }
      nlohmann::ordered_json function = {{"name", tool.name()}};
      if (!tool.description().empty()) function["description"] = tool.description();
      if (!tool.parameters_json().empty()) {
        nlohmann::ordered_json params = nlohmann::ordered_json::parse(
            tool.parameters_json(), nullptr, false, /*ignore_comments=*/false);
        if (params.is_discarded() || !params.is_object()) {
          return absl::InvalidArgumentError(
              StrCat("chat.tools[", i, "].parameters_json is not a JSON object"));
        }
        function["parameters"] = std::move(params);
      }
      tools.push_back({{"type", "function"}, {"function", std::move(function)}});
    }
    (*out)["tools"] = std::move(tools);
  }
  return absl::OkStatus();
}

// tool_choice, parallel_tool_calls and response_format, in the JSON the OpenAI parsers
// read (structured_request.h), so that both APIs decide them alike.
absl::Status ParseStructure(const pb::GenerateRequest& in, OpenAiRequest* r) {
  nlohmann::ordered_json body = nlohmann::ordered_json::object();
  if (in.has_response_format()) {
    const pb::ResponseFormat& f = in.response_format();
    if (f.has_json_schema()) {
      nlohmann::ordered_json schema =
          nlohmann::ordered_json::parse(f.json_schema(), nullptr, false);
      if (schema.is_discarded()) {
        return absl::InvalidArgumentError("response_format.json_schema is not valid JSON");
      }
      body["response_format"] = {{"type", "json_schema"},
                                 {"json_schema", {{"name", "schema"}, {"schema", schema}}}};
    } else if (f.json_object()) {
      body["response_format"] = {{"type", "json_object"}};
    }
  }
  BATON_RETURN_IF_ERROR(ParseResponseFormat(body, r));
  if (r->kind != OpenAiRequest::Kind::kChat) return absl::OkStatus();
  const pb::ChatInput& chat = in.chat();
  if (chat.has_parallel_tool_calls()) body["parallel_tool_calls"] = chat.parallel_tool_calls();
  if (chat.has_tool_choice()) {
    const std::string& choice = chat.tool_choice();
    if (choice == "auto" || choice == "none" || choice == "required") {
      body["tool_choice"] = choice;
    } else {
      body["tool_choice"] = {{"type", "function"}, {"function", {{"name", choice}}}};
    }
  }
  return ParseToolChoice(body, r);
}

}  // namespace

// Generate (generate_call.h), Tokenize and Detokenize (unary_call.h) run on completion
// queues and take their requests as bytes (wire_message.h): each is a string-carrying
// request. The other unary methods are plain sync handlers: callback ones would bring
// gRPC's callback polling threads into the router (RouterThreadsTest).
using AsyncApiService = pb::Baton::WithRawMethod_Tokenize<
    pb::Baton::WithRawMethod_Detokenize<pb::Baton::WithRawMethod_Generate<pb::Baton::Service>>>;

class GrpcApi::Service final : public AsyncApiService {
 public:
  explicit Service(const GrpcApiContext* c) : c_(*c) {}

  // Tokenize and Detokenize, for StartUnaryCalls.
  std::vector<UnaryMethod> UnaryMethods() {
    return {Unary("Tokenize", &Service::RequestTokenize, &Service::RunTokenize),
            Unary("Detokenize", &Service::RequestDetokenize, &Service::RunDetokenize)};
  }

  grpc::Status ListModels(grpc::ServerContext* ctx, const pb::ListModelsRequest*,
                          pb::ListModelsResponse* out) override {
    absl::Status s = CheckAuth(*ctx);
    if (s.ok()) FillCard(out->add_models());
    c_.metrics->CountRequest("grpc", "ListModels", CodeName(s));
    return service::ToGrpcStatus(s);
  }

  grpc::Status ModelInfo(grpc::ServerContext* ctx, const pb::ModelInfoRequest* req,
                         pb::ModelCard* out) override {
    absl::Status s = CheckAuth(*ctx);
    if (s.ok()) s = c_.model->CheckModelName(req->model());
    if (s.ok()) FillCard(out);
    c_.metrics->CountRequest("grpc", "ModelInfo", CodeName(s));
    return service::ToGrpcStatus(s);
  }

 private:
  absl::Status CheckAuth(const grpc::ServerContextBase& ctx) const {
    return CheckApiKey(ctx, *c_.api_keys).status();
  }

  // A raw method of the generated service (its RequestX) answered by `run`.
  template <class RequestFn, class Request, class Response>
  UnaryMethod Unary(const char* name, RequestFn request,
                    absl::Status (Service::*run)(const Request&, Response*)) {
    return {.name = name,
            .request = [this, request](grpc::ServerContext* ctx, grpc::ByteBuffer* in,
                                       grpc::ServerAsyncResponseWriter<grpc::ByteBuffer>* out,
                                       grpc::ServerCompletionQueue* cq,
                                       void* tag) { (this->*request)(ctx, in, out, cq, cq, tag); },
            .handle = [this, name, run](
                          const grpc::ServerContext& ctx, const grpc::ByteBuffer& in,
                          grpc::ByteBuffer* out) { return Answer(name, ctx, in, out, run); }};
  }

  // A raw unary call: the key, the request's share of the byte bound, the bytes parsed
  // (a string field that is not UTF-8 is INVALID_ARGUMENT naming it), then `run`.
  template <class Request, class Response>
  absl::Status Answer(const char* method, const grpc::ServerContext& ctx,
                      const grpc::ByteBuffer& in, grpc::ByteBuffer* out,
                      absl::Status (Service::*run)(const Request&, Response*)) {
    Request req;
    Response resp;
    absl::Status s = CheckAuth(ctx);
    absl::StatusOr<std::optional<service::ByteBudget::Lease>> held;
    if (s.ok()) s = (held = HoldRequestBytes(c_, in.Length())).status();
    if (s.ok()) s = ParseWireMessage(in, &req);
    if (s.ok()) s = (this->*run)(req, &resp);
    if (s.ok()) s = SerializeWireMessage(resp, out);
    c_.metrics->CountRequest("grpc", method, CodeName(s));
    return s;
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

  absl::Status RunTokenize(const pb::TokenizeRequest& req, pb::TokenizeResponse* out) {
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
    // The vocabulary's spelling ("Ġthe", "<0xC3>"), as the proto says and vLLM answers: it
    // is always UTF-8, where a token's bytes may be part of a character (é over two tokens),
    // which a string field cannot carry.
    for (int32_t id : ids) out->add_tokens(c_.model->tokenizer()->vocab().tokens[id]);
    return absl::OkStatus();
  }

  absl::Status RunDetokenize(const pb::DetokenizeRequest& req, pb::DetokenizeResponse* out) {
    BATON_RETURN_IF_ERROR(c_.model->CheckModelName(req.model()));
    std::vector<int32_t> ids(req.token_ids().begin(), req.token_ids().end());
    if (ids.size() > c_.limits.max_prompt_token_ids) {
      return absl::InvalidArgumentError(StrCat(
          "token_ids has ", ids.size(), " ids; the maximum is ", c_.limits.max_prompt_token_ids));
    }
    BATON_RETURN_IF_ERROR(c_.model->CheckTokenIds(ids, "token_ids"));
    tokenizer::DecodeOptions options;
    options.skip_special_tokens = req.has_skip_special_tokens() ? req.skip_special_tokens() : true;
    BATON_ASSIGN_OR_RETURN(*out->mutable_text(), c_.model->tokenizer()->Decode(ids, options));
    return absl::OkStatus();
  }

  const GrpcApiContext& c_;
};

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
  if (s.has_top_k()) {
    // As over HTTP: -1 and 0 mean off; the worker checks the vocabulary bound.
    if (s.top_k() < -1) {
      return absl::InvalidArgumentError(
          StrCat("sampling.top_k is ", s.top_k(), "; it must be -1 or 0 (off) or at least 1"));
    }
    r.top_k = s.top_k();
  }
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
    r.max_tokens_param = "stop.max_tokens";
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
  r.trace = in.trace();
  r.include_stop_str_in_output = stop.include_stop_str_in_output();
  if (in.has_logprobs()) {
    if (in.logprobs() < 0 || in.logprobs() > limits.max_top_logprobs) {
      return absl::InvalidArgumentError(StrCat(
          "logprobs is ", in.logprobs(), "; it must be in [0, ", limits.max_top_logprobs, "]"));
    }
    r.logprobs = in.logprobs();
  }
  for (const auto& [name, value] :
       {std::pair<const char*, const std::string*>{"request_id", &in.request_id()},
        {"cache_salt", &in.cache_salt()},
        {"prompt_cache_key", &in.prompt_cache_key()}}) {
    if (value->size() > limits.max_id_bytes) {
      return absl::InvalidArgumentError(
          StrCat(name, " is ", value->size(), " bytes; the maximum is ", limits.max_id_bytes));
    }
  }
  for (char c : in.request_id()) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) {
      return absl::InvalidArgumentError("request_id must not contain control characters");
    }
  }
  r.request_id = in.request_id();
  r.priority = in.priority();
  r.cache_salt = in.cache_salt();
  r.prompt_cache_key = in.prompt_cache_key();
  r.skip_special_tokens = in.has_skip_special_tokens() ? in.skip_special_tokens() : true;
  BATON_RETURN_IF_ERROR(ParseStructure(in, &r));
  return r;
}

absl::StatusOr<std::optional<service::ByteBudget::Lease>> HoldRequestBytes(
    const GrpcApiContext& context, size_t bytes) {
  if (context.bodies == nullptr) return std::nullopt;
  std::optional<service::ByteBudget::Lease> lease = context.bodies->TryTake(bytes);
  if (!lease) {
    return absl::ResourceExhaustedError(StrCat("the server holds ", context.bodies->held(),
                                               " bytes of requests and this one adds ", bytes,
                                               "; the limit (--max-inflight-body-bytes) is ",
                                               context.bodies->limit(), " bytes. Retry later"));
  }
  return lease;
}

absl::StatusOr<const service::Tenant*> CheckApiKey(const grpc::ServerContextBase& ctx,
                                                   const service::ApiKeys& keys) {
  const auto& md = ctx.client_metadata();
  auto it = md.find("authorization");
  if (keys.required() && it == md.end()) {
    return absl::UnauthenticatedError(
        "missing API key: send metadata 'authorization: Bearer <key>'");
  }
  const service::Tenant* tenant = keys.Find(
      it == md.end() ? std::string_view() : std::string_view(it->second.data(), it->second.size()));
  if (tenant == nullptr) {
    return absl::UnauthenticatedError("incorrect API key in 'authorization' metadata");
  }
  return tenant;
}

GrpcApi::GrpcApi(GrpcApiContext context)
    : context_(std::move(context)),
      service_(std::make_unique<Service>(&context_)),
      state_(std::make_unique<ApiLoopState>()),
      unary_(service_->UnaryMethods()) {}

GrpcApi::~GrpcApi() { Stop(); }

void GrpcApi::Register(grpc::ServerBuilder& builder) { builder.RegisterService(service_.get()); }

void GrpcApi::Start(dispatch::CompletionLoops* loops) {
  started_ = true;
  StartGenerateCalls(&context_, service_.get(), loops, state_.get());
  for (const UnaryMethod& m : unary_) StartUnaryCalls(&m, loops, state_.get());
}

void GrpcApi::Stop() {
  state_->stopping.store(true);
  // The server's Shutdown cancelled every call, and the loops finish them. A queue may
  // only shut down once no call can start another operation on it.
  while (started_ && state_->live_calls.load() > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace baton::frontdoor
