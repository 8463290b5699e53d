// Parsing and validation of OpenAI-compatible request bodies (/v1/completions and
// /v1/chat/completions) into plain structs. Behaves like vLLM's OpenAI server as far as a
// client can tell; the places where we chose differently are commented in the .cc.
//
//   ProtocolLimits limits;
//   absl::StatusOr<OpenAiRequest> request = ParseChatRequest(body, limits);
//   if (!request.ok()) {
//     ApiError e = ToApiError(request.status());  // 400, param from the status payload
//     ...
//   }
//
// Every error is InvalidArgument whose message names the parameter and the bound or the
// expected type ("'n' is 40; the maximum is 16"); ParamOf(status) gives the parameter path
// ("messages[2].content[0].type") for the envelope's "param". Unknown fields are ignored;
// known features we do not implement (echo, best_of, guided decoding, ...) are rejected
// rather than silently ignored.
//
// Only protocol-level bounds are checked here, and top_k's lower bound (-1). Sampling
// ranges (temperature >= 0, top_p in (0, 1], ...) and token ids against the vocabulary are
// the worker's and the tokenizer's to check, max_tokens against the context length is
// FitToContext's (request_builder.h); non-finite numbers are rejected here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace baton::frontdoor {

struct ProtocolLimits {
  int max_n = 16;
  int max_stop = 16;
  size_t max_stop_bytes = 1024;
  int max_top_logprobs = 20;
  int max_logit_bias = 1024;
  int max_messages = 4096;
  size_t max_prompt_token_ids = 1 << 20;
  int max_stop_token_ids = 1024;
  int max_json_depth = 64;    // nesting of arrays/objects in the body (tool schemas nest)
  size_t max_id_bytes = 256;  // request_id, cache_salt, user
};

struct OpenAiRequest {
  enum class Kind { kCompletion, kChat };
  Kind kind = Kind::kCompletion;
  std::string model;  // "" when absent

  // Completions: exactly one is set. "prompt" may be a string, an array of one string,
  // token ids, or an array of one token-id array; several prompts are rejected (send one
  // request per prompt).
  std::optional<std::string> prompt_text;
  std::optional<std::vector<int32_t>> prompt_ids;

  // Chat: {"messages": [...]} plus "tools" when given, ready for the chat template. Each
  // message has "role" and a string "content" (text parts joined with "\n", null -> ""),
  // and keeps only "name", "tool_calls" (assistant; function.arguments parsed into JSON),
  // "tool_call_id" (tool) and "reasoning_content"/"reasoning" -- the keys vLLM keeps.
  nlohmann::ordered_json chat;
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();
  bool add_generation_prompt = true;
  bool continue_final_message = false;

  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage

  // Chat: max_completion_tokens wins over max_tokens; unset means "up to the context".
  // Completions: 16 when absent (OpenAI and vLLM); an explicit null means unset.
  std::optional<int64_t> max_tokens;
  std::string max_tokens_param = "max_tokens";  // the field it came from, for errors
  int n = 1;
  std::vector<std::string> stop;  // "stop": a string or an array of strings
  std::vector<int32_t> stop_token_ids;
  std::optional<double> temperature, top_p, min_p, repetition_penalty, presence_penalty,
      frequency_penalty;
  std::optional<int64_t> top_k;  // vLLM: -1 or 0 means off
  std::optional<uint64_t> seed;  // any int64, as vLLM takes; negatives wrap (two's complement)
  std::vector<std::pair<int32_t, float>> logit_bias;  // sorted by token id, unique
  // Set means "return logprobs", with this many top alternatives (0..max_top_logprobs).
  // Completions: "logprobs": int. Chat: "logprobs": true plus "top_logprobs": int.
  std::optional<int> logprobs;
  bool echo = false;  // always false: echo=true is rejected
  bool ignore_eos = false;
  // Baton extension: return the request's journey (docs/inspector.md) in the response.
  bool trace = false;
  bool skip_special_tokens = true;
  bool include_stop_str_in_output = false;
  std::optional<bool> add_special_tokens;  // vLLM extension; unset: the endpoint's default
  std::string request_id;                  // vLLM extension "request_id"
  int priority = 0;
  std::string cache_salt;
  std::string user;
  // OpenAI's routing hint: requests with the same key prefer the same worker. Without it,
  // `user` serves as the key.
  std::string prompt_cache_key;

  // Chat tools (docs/tool_calls.md); the tools themselves are chat["tools"]. Without
  // tool_choice: "auto" when there are tools, else "none" (OpenAI's defaults).
  enum class ToolChoice { kNone, kAuto, kRequired, kNamed };
  ToolChoice tool_choice = ToolChoice::kNone;
  std::string tool_choice_name;  // kNamed: the function
  bool parallel_tool_calls = true;

  // What constrained decoding must produce (docs/structured_outputs.md): from
  // response_format, or from tool_choice "required" / a named function, whose schemas
  // (structured_request.h) ask for the calls' JSON. The schema compiled once here, so
  // that an unsupported one is a 400 naming it.
  enum class Constraint { kNone, kJsonObject, kJsonSchema };
  Constraint constraint = Constraint::kNone;
  std::string constraint_schema;  // kJsonSchema: compact JSON text
};

// A chat message's role must be one of OpenAI's: system, developer, user, assistant, tool,
// function. InvalidArgument naming `path` (the parameter) otherwise.
absl::Status CheckMessageRole(std::string_view role, const std::string& path);

absl::StatusOr<OpenAiRequest> ParseCompletionRequest(std::string_view body,
                                                     const ProtocolLimits& limits);
absl::StatusOr<OpenAiRequest> ParseChatRequest(std::string_view body, const ProtocolLimits& limits);

}  // namespace baton::frontdoor
