#include "frontdoor/openai/request_builder.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <random>
#include <string_view>
#include <utility>

#include "common/status.h"
#include "common/strings.h"
#include "dispatch/request_trace.h"
#include "frontdoor/openai/openai_error.h"
#include "toolcall/tool_call_format.h"

namespace baton::frontdoor {
namespace {

// The longest prefix of `s` of at most `max_bytes` that ends on a character boundary.
std::string_view Utf8Prefix(std::string_view s, size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  size_t end = max_bytes;
  while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) --end;
  return s.substr(0, end);
}

}  // namespace

std::string NewRequestId(const std::string& prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char hex[33];
  std::snprintf(hex, sizeof(hex), "%016llx%016llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng()));
  return StrCat(prefix, "-", hex);
}

absl::StatusOr<int64_t> FitToContext(int64_t context, int64_t prompt_tokens,
                                     const OpenAiRequest& r) {
  const char* what = r.kind == OpenAiRequest::Kind::kChat ? "messages" : "prompt";
  if (prompt_tokens == 0) {
    return ParamError(what, StrCat("the ", what, " is empty after tokenization"));
  }
  if (prompt_tokens >= context) {
    return ParamError(what,
                      StrCat("This model's maximum context length is ", context,
                             " tokens. However, your request has ", prompt_tokens,
                             " input tokens. Please reduce the length of the input ", what, "."));
  }
  if (!r.max_tokens) return context - prompt_tokens;
  const int64_t max_tokens = *r.max_tokens;
  // Compared without the sum, which a max_tokens near 2^63 would overflow; the total in the
  // message saturates for the same reason.
  if (max_tokens > context - prompt_tokens) {
    const int64_t requested = max_tokens > std::numeric_limits<int64_t>::max() - prompt_tokens
                                  ? std::numeric_limits<int64_t>::max()
                                  : prompt_tokens + max_tokens;
    return ParamError(r.max_tokens_param,
                      StrCat("This model's maximum context length is ", context,
                             " tokens. However, you requested ", requested, " tokens (",
                             prompt_tokens, " in the ", what, ", ", max_tokens,
                             " in the completion). Please reduce the length of the ", what,
                             " or completion ('", r.max_tokens_param, "')."));
  }
  return max_tokens;
}

absl::Status CheckTraceBounds(const OpenAiRequest& r, int64_t prompt_tokens) {
  if (r.n != 1) {
    return ParamError("trace", StrCat("trace follows one sequence; n must be 1, got ", r.n));
  }
  if (prompt_tokens > kMaxTracePromptTokens) {
    const char* what = r.kind == OpenAiRequest::Kind::kChat ? "messages" : "prompt";
    return ParamError(
        what, StrCat("a traced request's prompt may have at most ", kMaxTracePromptTokens,
                     " tokens; it has ", prompt_tokens, ". Shorten it, or send it without trace"));
  }
  if (r.max_tokens && *r.max_tokens > kMaxTraceOutputTokens) {
    return ParamError(
        r.max_tokens_param,
        StrCat("a traced request may generate at most ", kMaxTraceOutputTokens, " tokens; ",
               r.max_tokens_param, " is ", *r.max_tokens, ". Lower it, or send it without trace"));
  }
  return absl::OkStatus();
}

absl::StatusOr<BuiltRequest> BuildRequest(const OpenAiRequest& r, const ServedModel& model,
                                          const std::string& id_prefix,
                                          const service::Tenant& tenant) {
  BATON_RETURN_IF_ERROR(model.CheckModelName(r.model));
  const bool chat = r.kind == OpenAiRequest::Kind::kChat;
  if (chat && r.continue_final_message) {
    return absl::InvalidArgumentError(
        "'continue_final_message' is not supported; end the messages with a user turn");
  }
  BuiltRequest out;
  dispatch::GenerationRequest& g = out.generation;
  const auto start = std::chrono::steady_clock::now();
  if (chat) {
    BATON_ASSIGN_OR_RETURN(g.prompt_ids, model.EncodeChat(r.chat, r.add_generation_prompt,
                                                          r.add_special_tokens.value_or(false)));
  } else if (r.prompt_ids) {
    BATON_RETURN_IF_ERROR(model.CheckTokenIds(*r.prompt_ids, "prompt"));
    g.prompt_ids = *r.prompt_ids;
  } else {
    BATON_ASSIGN_OR_RETURN(g.prompt_ids, model.EncodeText(r.prompt_text.value_or(""),
                                                          r.add_special_tokens.value_or(true)));
  }
  out.tokenize_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  BATON_ASSIGN_OR_RETURN(
      int64_t max_tokens,
      FitToContext(model.max_model_len(), static_cast<int64_t>(g.prompt_ids.size()), r));
  if (r.trace) {
    BATON_RETURN_IF_ERROR(CheckTraceBounds(r, static_cast<int64_t>(g.prompt_ids.size())));
    max_tokens = std::min(max_tokens, kMaxTraceOutputTokens);
    g.trace = true;
  }
  BATON_RETURN_IF_ERROR(model.CheckTokenIds(r.stop_token_ids, "stop_token_ids"));

  baton::internal::v1::SamplingParams& p = g.params;
  if (r.temperature) p.set_temperature(*r.temperature);
  // vLLM spells "no top-k" as -1 or 0; the engine as 0.
  if (r.top_k) p.set_top_k(*r.top_k < 0 ? 0 : *r.top_k);
  if (r.top_p) p.set_top_p(*r.top_p);
  if (r.min_p) p.set_min_p(*r.min_p);
  if (r.repetition_penalty) p.set_repetition_penalty(*r.repetition_penalty);
  if (r.presence_penalty) p.set_presence_penalty(*r.presence_penalty);
  if (r.frequency_penalty) p.set_frequency_penalty(*r.frequency_penalty);
  for (const auto& [id, bias] : r.logit_bias) (*p.mutable_logit_bias())[id] = bias;
  if (r.seed) p.set_seed(*r.seed);
  if (r.logprobs) p.set_logprobs(*r.logprobs);
  p.set_max_tokens(max_tokens);
  p.mutable_stop_token_ids()->Add(r.stop_token_ids.begin(), r.stop_token_ids.end());
  p.set_ignore_eos(r.ignore_eos);
  if (r.constraint == OpenAiRequest::Constraint::kJsonObject) {
    p.mutable_constraint()->set_json_object(true);
  } else if (r.constraint == OpenAiRequest::Constraint::kJsonSchema) {
    p.mutable_constraint()->set_json_schema(r.constraint_schema);
  }

  g.stop = r.stop;
  g.include_stop_str_in_output = r.include_stop_str_in_output;
  g.skip_special_tokens = r.skip_special_tokens;
  // A parser whose markers are special tokens (<|python_tag|>, [TOOL_CALLS]) must see them:
  // it takes them out of the content itself.
  if (chat && r.tool_choice == OpenAiRequest::ToolChoice::kAuto && model.tool_call_format() &&
      toolcall::NeedsSpecialTokens(*model.tool_call_format())) {
    g.skip_special_tokens = false;
  }
  g.n = r.n;
  // Unique whatever the client chose; the start of the client's id rides at the end, so
  // that a worker's log lines can be matched to the client's request. Cut short so that
  // the worker's id, with a choice's, a transfer's and a migration's suffixes, stays
  // within the workers' 256-byte bound (a whole 256-byte client id once made them refuse
  // the request).
  g.request_id = r.request_id.empty()
                     ? NewRequestId(id_prefix)
                     : StrCat(NewRequestId(id_prefix), ".", Utf8Prefix(r.request_id, 160));
  out.response_id = r.request_id.empty() ? g.request_id : r.request_id;
  g.priority = service::TenantPriority(tenant, r.priority);
  g.cache_salt = service::TenantCacheSalt(tenant, r.cache_salt);
  g.session = r.prompt_cache_key.empty() ? r.user : r.prompt_cache_key;
  return out;
}

}  // namespace baton::frontdoor
