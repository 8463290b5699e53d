#include "toolcall/tool_call_format.h"

#include <array>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "common/strings.h"

namespace baton::toolcall {
namespace {

constexpr std::array<std::pair<Format, std::string_view>, 7> kNames = {{
    {Format::kHermes, "hermes"},
    {Format::kLlama3Json, "llama3_json"},
    {Format::kMistral, "mistral"},
    {Format::kFunctionary, "functionary"},
    {Format::kCommandR, "command_r"},
    {Format::kDeepSeekR1, "deepseek_r1"},
    {Format::kFirefunction, "firefunction"},
}};

bool Contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

}  // namespace

std::string_view FormatName(Format f) {
  for (const auto& [format, name] : kNames) {
    if (format == f) return name;
  }
  return "unknown";
}

absl::StatusOr<Format> FormatByName(std::string_view name) {
  std::string known;
  for (const auto& [format, format_name] : kNames) {
    if (format_name == name) return format;
    if (!known.empty()) known += ", ";
    known += format_name;
  }
  return absl::InvalidArgumentError(
      StrCat("unknown tool-call parser '", name, "'; known: ", known));
}

std::optional<Format> DetectFormat(std::string_view source) {
  // Most specific markers first: the Llama-based families (Functionary, Firefunction) also
  // render Llama 3 headers, and Functionary renders <|python_tag|> as Llama 3.1 does.
  if (Contains(source, "<｜tool▁calls▁begin｜>") || Contains(source, "<｜tool▁call▁begin｜>")) {
    return Format::kDeepSeekR1;
  }
  if (Contains(source, "[TOOL_CALLS]")) return Format::kMistral;
  if (Contains(source, "<tool_call>")) return Format::kHermes;
  if (Contains(source, "functools[")) return Format::kFirefunction;
  if (Contains(source, "<function=")) return Format::kFunctionary;
  if (Contains(source, "Action:") && Contains(source, "tool_name")) return Format::kCommandR;
  // Llama 3.1/3.3 render built-in calls after <|python_tag|>; Llama 3.2 has no built-ins
  // and only asks for {"name": ..., "parameters": ...} in its tool prompt.
  if (Contains(source, "<|python_tag|>")) return Format::kLlama3Json;
  if (Contains(source, "<|start_header_id|>") && Contains(source, "\"parameters\"") &&
      Contains(source, "tool_call")) {
    return Format::kLlama3Json;
  }
  return std::nullopt;
}

bool NeedsSpecialTokens(Format f) {
  switch (f) {
    // <tool_call> is an added token; Hermes 3 marks it special, so keep special tokens.
    case Format::kHermes:
      return true;
    case Format::kLlama3Json:
      return true;  // <|python_tag|>
    case Format::kMistral:
      return true;  // [TOOL_CALLS], [ARGS], [CALL_ID]
    case Format::kFunctionary:
      return true;  // <|python_tag|>
    case Format::kCommandR:
      return false;  // plain text
    case Format::kDeepSeekR1:
      return true;  // <｜tool▁calls▁begin｜> and the rest
    case Format::kFirefunction:
      return false;  // "functools" is plain text
  }
  return false;
}

}  // namespace baton::toolcall
