// Llama 3.1 / 3.2 / 3.3 JSON tool calling: the whole output is the call,
//   {"name": "f", "parameters": {...}}
// ("arguments" is accepted too), optionally after <|python_tag|>, several separated by ';'.
// Built-in tools (Llama 3.1/3.3 with builtin_tools) come as
//   <|python_tag|>brave_search.call(query="...")
// which becomes name "brave_search", arguments {"query": "..."}.
//
// There is no marker, so the start of the output is held back while it can still be a call
// (optional whitespace, then '{' or <|python_tag|>); once it cannot, the rest of the output
// is content.
#include "toolcall/body_reader.h"
#include "toolcall/call_json.h"

namespace baton::toolcall::internal {
namespace {

constexpr std::string_view kPythonTag = "<|python_tag|>";

bool IsIdentStart(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsIdentChar(int c) { return IsIdentStart(c) || (c >= '0' && c <= '9'); }

// A Python string literal ('...' or "...") at text[*pos], with the common escapes.
std::optional<std::string> ReadPythonString(std::string_view text, size_t* pos) {
  if (*pos >= text.size() || (text[*pos] != '"' && text[*pos] != '\'')) return std::nullopt;
  char quote = text[(*pos)++];
  std::string out;
  while (*pos < text.size()) {
    char c = text[(*pos)++];
    if (c == quote) return out;
    if (c != '\\') {
      out.push_back(c);
      continue;
    }
    if (*pos >= text.size()) return std::nullopt;
    char e = text[(*pos)++];
    switch (e) {
      case 'n':
        out.push_back('\n');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case '\\':
      case '\'':
      case '"':
        out.push_back(e);
        break;
      default:
        out.push_back('\\');
        out.push_back(e);
        break;
    }
  }
  return std::nullopt;
}

void SkipSpaces(std::string_view text, size_t* pos) {
  while (*pos < text.size() && IsJsonSpace(text[*pos])) ++*pos;
}

// `tool.call(key="value", n=3, flag=True)` up to the end of `text` (trailing whitespace
// allowed). Values: string literals, and anything JSON reads as a number; True/False/None.
std::optional<ToolCall> ParseBuiltinCall(std::string_view text) {
  size_t pos = 0;
  size_t name_end = 0;
  while (name_end < text.size() && IsIdentChar(static_cast<unsigned char>(text[name_end]))) {
    ++name_end;
  }
  if (name_end == 0 || name_end > kMaxNameBytes) return std::nullopt;
  std::string name(text.substr(0, name_end));
  pos = name_end;
  constexpr std::string_view kCall = ".call(";
  if (text.substr(pos, kCall.size()) != kCall) return std::nullopt;
  pos += kCall.size();
  nlohmann::json arguments = nlohmann::json::object();
  SkipSpaces(text, &pos);
  while (pos < text.size() && text[pos] != ')') {
    size_t key_start = pos;
    while (pos < text.size() && IsIdentChar(static_cast<unsigned char>(text[pos]))) ++pos;
    if (pos == key_start) return std::nullopt;
    std::string key(text.substr(key_start, pos - key_start));
    SkipSpaces(text, &pos);
    if (pos >= text.size() || text[pos] != '=') return std::nullopt;
    ++pos;
    SkipSpaces(text, &pos);
    if (pos >= text.size()) return std::nullopt;
    if (text[pos] == '"' || text[pos] == '\'') {
      std::optional<std::string> value = ReadPythonString(text, &pos);
      if (!value) return std::nullopt;
      arguments[key] = std::move(*value);
    } else {
      size_t value_start = pos;
      while (pos < text.size() && text[pos] != ',' && text[pos] != ')' && !IsJsonSpace(text[pos])) {
        ++pos;
      }
      std::string_view token = text.substr(value_start, pos - value_start);
      if (token == "True") {
        arguments[key] = true;
      } else if (token == "False") {
        arguments[key] = false;
      } else if (token == "None") {
        arguments[key] = nullptr;
      } else {
        std::optional<nlohmann::json> number = ParseJson(token);
        if (!number || !number->is_number()) return std::nullopt;
        arguments[key] = std::move(*number);
      }
    }
    SkipSpaces(text, &pos);
    if (pos < text.size() && text[pos] == ',') {
      ++pos;
      SkipSpaces(text, &pos);
    }
  }
  if (pos >= text.size()) return std::nullopt;
  ++pos;  // ')'
  SkipSpaces(text, &pos);
  if (pos != text.size()) return std::nullopt;
  // The values came from raw bytes, which may not be UTF-8: DumpJson replaces those.
  return ToolCall{std::move(name), DumpJson(arguments)};
}

class Llama3JsonScanner : public FormatScanner {
 public:
  ScanStep Next(std::string_view pending, bool final) override {
    if (content_only_) return ScanStep::Content(pending.size());
    BodyReader r(pending, final, &cache_);
    ScanStep step = ReadCall(r);
    if (step.kind == ScanStep::Kind::kContent) content_only_ = true;
    if (step.kind != ScanStep::Kind::kNeedMore) cache_.Clear();
    return step;
  }

 private:
  ScanStep ReadCall(BodyReader& r) {
    bool tagged = false;
    int next = 0;
    if (!r.Ws() || !r.OptionalLiteral(kPythonTag, &tagged) || !r.Ws() || !r.PeekOrEnd(&next)) {
      return r.Stop();
    }
    if (tagged && IsIdentStart(next)) {
      // A built-in tool call runs to the end of the output.
      if (!r.final()) {
        r.NeedMore();
        return r.Stop();
      }
      std::optional<ToolCall> call = ParseBuiltinCall(r.Rest());
      if (!call) return ScanStep::Content(r.text().size());
      return ScanStep::Calls(r.text().size(), {std::move(*call)});
    }
    if (next != '{') {
      r.Invalid();
      return r.Stop();
    }
    std::string_view json;
    if (!r.Json("{", &json) || !r.Ws() || !r.PeekOrEnd(&next)) return r.Stop();
    if (next != ';' && next != -1) {
      r.Invalid();
      return r.Stop();
    }
    std::optional<nlohmann::json> value = ParseJson(json);
    if (!value) return ScanStep::Content(r.pos());
    std::optional<ToolCall> call = CallFromObject(*value, "name", {"parameters", "arguments"});
    if (!call) return ScanStep::Content(r.pos());
    size_t length = r.pos() + (next == ';' ? 1 : 0);
    return ScanStep::Calls(length, {std::move(*call)});
  }

  ScanCache cache_;
  bool content_only_ = false;
};

}  // namespace

std::unique_ptr<FormatScanner> NewLlama3JsonScanner() {
  return std::make_unique<Llama3JsonScanner>();
}

}  // namespace baton::toolcall::internal
