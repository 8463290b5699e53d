#include "toolcall/call_json.h"

#include "toolcall/body_reader.h"

namespace baton::toolcall::internal {
namespace {

// Structural nesting depth of JSON text (brackets outside strings), stopping early once it
// passes `limit`.
int MaxDepth(std::string_view text, int limit) {
  int depth = 0;
  int max_depth = 0;
  bool in_string = false;
  bool escape = false;
  for (char c : text) {
    if (in_string) {
      if (escape) {
        escape = false;
      } else if (c == '\\') {
        escape = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      max_depth = std::max(max_depth, ++depth);
      if (max_depth > limit) return max_depth;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return max_depth;
}

}  // namespace

std::optional<nlohmann::json> ParseJson(std::string_view text) {
  if (MaxDepth(text, kMaxJsonDepth) > kMaxJsonDepth) return std::nullopt;
  nlohmann::json value = nlohmann::json::parse(text.begin(), text.end(), nullptr,
                                               /*allow_exceptions=*/false);
  if (value.is_discarded()) return std::nullopt;
  return value;
}

std::string DumpJson(const nlohmann::json& value) {
  // Parsed text is valid UTF-8 already; `replace` only keeps dump() from ever throwing.
  return value.dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
}

std::optional<std::string> NormalizeArguments(const nlohmann::json* arguments) {
  if (arguments == nullptr || arguments->is_null()) return std::string("{}");
  if (arguments->is_object()) return DumpJson(*arguments);
  if (arguments->is_string()) {
    const std::string& text = arguments->get_ref<const std::string&>();
    if (text.find_first_not_of(" \t\r\n") == std::string::npos) return std::string("{}");
    std::optional<nlohmann::json> inner = ParseJson(text);
    if (inner && inner->is_object()) return DumpJson(*inner);
  }
  return std::nullopt;
}

std::optional<ToolCall> CallFromObject(const nlohmann::json& object, std::string_view name_key,
                                       std::initializer_list<std::string_view> argument_keys) {
  if (!object.is_object()) return std::nullopt;
  auto name = object.find(name_key);
  if (name == object.end() || !name->is_string() || name->get_ref<const std::string&>().empty()) {
    return std::nullopt;
  }
  const nlohmann::json* arguments = nullptr;
  for (std::string_view key : argument_keys) {
    auto it = object.find(key);
    if (it != object.end()) {
      arguments = &*it;
      break;
    }
  }
  std::optional<std::string> normalized = NormalizeArguments(arguments);
  if (!normalized) return std::nullopt;
  return ToolCall{name->get<std::string>(), std::move(*normalized)};
}

std::optional<std::vector<ToolCall>> CallsFromJson(
    const nlohmann::json& value, std::string_view name_key,
    std::initializer_list<std::string_view> argument_keys) {
  std::vector<ToolCall> calls;
  if (value.is_object()) {
    std::optional<ToolCall> call = CallFromObject(value, name_key, argument_keys);
    if (!call) return std::nullopt;
    calls.push_back(std::move(*call));
    return calls;
  }
  if (!value.is_array() || value.empty()) return std::nullopt;
  for (const nlohmann::json& element : value) {
    std::optional<ToolCall> call = CallFromObject(element, name_key, argument_keys);
    if (!call) return std::nullopt;
    calls.push_back(std::move(*call));
  }
  return calls;
}

}  // namespace baton::toolcall::internal
