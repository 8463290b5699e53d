// The tool-call markup families that chat templates teach models to emit, and how to tell
// which one a template uses. docs/tool_calls.md describes each format.
//
//   std::optional<Format> format = DetectFormat(template_source);
//   if (format) parser = ToolCallParser::Create(*format);
#pragma once

#include <optional>
#include <string_view>

#include "absl/status/statusor.h"

namespace baton::toolcall {

enum class Format {
  kHermes,       // <tool_call>{"name": ..., "arguments": {...}}</tool_call> (Hermes, Qwen)
  kLlama3Json,   // {"name": ..., "parameters": {...}} as the whole output (Llama 3.1-3.3)
  kMistral,      // [TOOL_CALLS][{...}, ...] or [TOOL_CALLS]name[ARGS]{...}
  kFunctionary,  // <function=name>{...}</function>, <|python_tag|>code (Functionary v3.1)
  kCommandR,     // Action: ```json [{"tool_name": ..., "parameters": {...}}] ``` (Command R+)
  kDeepSeekR1,   // <｜tool▁calls▁begin｜>...<｜tool▁calls▁end｜> (DeepSeek-R1 distills)
  kFirefunction,  //  functools[{"name": ..., "arguments": {...}}] (Firefunction v2)
};

// "hermes", "llama3_json", "mistral", "functionary", "command_r", "deepseek_r1",
// "firefunction".
std::string_view FormatName(Format f);

// For --tool-call-parser: InvalidArgument "unknown tool-call parser 'x'; known: hermes,
// llama3_json, ..." for a name that is none of FormatName's.
absl::StatusOr<Format> FormatByName(std::string_view name);

// The format a chat template's source text implies (the markers it renders), or nullopt
// when it shows none (the template has no tool support).
std::optional<Format> DetectFormat(std::string_view chat_template_source);

// Whether the format's markers are special tokens that detokenization would drop with
// skip_special_tokens (e.g. <|python_tag|>, [TOOL_CALLS], DeepSeek's): the caller then
// decodes with special tokens kept and passes that text to the parser.
bool NeedsSpecialTokens(Format f);

}  // namespace baton::toolcall
