// The parts of a request that ask for structure in the output: response_format (JSON by
// constrained decoding, docs/structured_outputs.md) and, for chat, tool_choice and
// parallel_tool_calls (docs/tool_calls.md). Called by openai_request.cc's parsers after
// the tools are read; every error is InvalidArgument naming the parameter.
//
// tool_choice "required" and a named function are enforced as vLLM does: the output is
// constrained to JSON that the router turns into tool calls (ToolCallsSchema), not to the
// model's own tool-call markup, which differs by template family.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "frontdoor/openai/openai_request.h"
#include "nlohmann/json.hpp"

namespace baton::frontdoor {

// response_format: {"type": "text" | "json_object" | "json_schema", "json_schema": {...}}.
absl::Status ParseResponseFormat(const nlohmann::ordered_json& body, OpenAiRequest* r);

// tool_choice and parallel_tool_calls, against r->chat["tools"] (already checked).
absl::Status ParseToolChoice(const nlohmann::ordered_json& body, OpenAiRequest* r);

// The schema forced tool calls are constrained to: for a named function its parameters
// (the output is the call's arguments); for "required" an array of 1 (or, with
// parallel_tool_calls, more) {"name", "parameters"} objects, one branch per tool.
std::string ToolCallsSchema(const OpenAiRequest& r);

}  // namespace baton::frontdoor
