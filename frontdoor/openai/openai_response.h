// OpenAI response bodies: whole responses, streaming chunks (one JSON object each, without
// the SSE "data: " framing) and the model list, in the shapes the official SDKs parse.
//
//   ChoiceOut choice;
//   choice.text = delta_text;
//   sse.Send(ChatChunkJson(id, created, model, choice, /*with_role=*/first));
//   ...
//   sse.Send(UsageChunkJson(OpenAiRequest::Kind::kChat, id, created, model, usage));
//
// Token text may be invalid UTF-8 (a token can end inside a character): strings are written
// with U+FFFD for invalid bytes, and chat logprobs carry the raw bytes in "bytes".
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "baton/v1/trace.pb.h"
#include "frontdoor/openai/openai_request.h"
#include "frontdoor/openai/request_log.h"

namespace baton::frontdoor {

struct TopLogprobOut {
  int32_t token_id = 0;
  std::string token;  // raw bytes of the token's text
  float logprob = 0;
};

struct LogprobOut {
  int32_t token_id = 0;
  std::string token;
  float logprob = 0;
  std::vector<TopLogprobOut> top;  // best first
};

struct UsageOut {
  int64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
  // Written beside "usage" as "timings" (a Baton extension, as llama.cpp's server has one).
  std::optional<RequestTimings> timings;
  // Written beside "usage" as "trace" (a traced request: docs/inspector.md).
  std::shared_ptr<const baton::v1::RequestTrace> trace;
};

// A tool call, whole (a response's message.tool_calls) or as a streamed delta: a call's
// first delta carries id and name, later ones only argument fragments (OpenAI's shape).
struct ToolCallOut {
  int index = 0;  // the call's place among the choice's calls
  std::string id;
  std::string name;
  std::string arguments;  // JSON text (a fragment of it, in a delta)
};

struct ChoiceOut {
  int index = 0;
  std::string text;
  // Chat: calls parsed out of the output (or forced by tool_choice). A whole message with
  // calls and no other text has "content": null.
  std::vector<ToolCallOut> tool_calls;
  bool has_logprobs = false;  // write "logprobs" as an object (possibly empty), else null
  std::vector<LogprobOut> logprobs;
  std::optional<std::string> finish_reason;  // "stop" | "length" | "tool_calls" | null
  // vLLM extension "stop_reason": the stop string that ended the choice, or the stop token
  // id (written as a JSON integer, as vLLM does); null when neither.
  std::optional<std::string> stop_reason;
  std::optional<int32_t> stop_token_id;
  // Completions: logprobs.text_offset of this chunk's first token (characters of text the
  // choice produced before it).
  int64_t text_offset = 0;
};

std::string CompletionChunkJson(std::string_view id, int64_t created, std::string_view model,
                                const ChoiceOut& choice);
// The first chunk of each choice carries delta.role = "assistant" (with_role).
std::string ChatChunkJson(std::string_view id, int64_t created, std::string_view model,
                          const ChoiceOut& choice, bool with_role);
// The last chunk when stream_options.include_usage: "choices": [] and "usage".
std::string UsageChunkJson(OpenAiRequest::Kind kind, std::string_view id, int64_t created,
                           std::string_view model, const UsageOut& usage);

std::string CompletionResponseJson(std::string_view id, int64_t created, std::string_view model,
                                   const std::vector<ChoiceOut>& choices, const UsageOut& usage);
std::string ChatResponseJson(std::string_view id, int64_t created, std::string_view model,
                             const std::vector<ChoiceOut>& choices, const UsageOut& usage);

struct ModelEntry {
  std::string id;
  int64_t created = 0;
  std::string owned_by;
  int64_t max_model_len = 0;
};

// {"object": "list", "data": [ModelJson...]}
std::string ModelListJson(const std::vector<ModelEntry>& models);
// {"id", "object": "model", "created", "owned_by", "root", "parent": null, "max_model_len"}
std::string ModelJson(const ModelEntry& model);

}  // namespace baton::frontdoor
