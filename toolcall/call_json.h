// Internal: JSON helpers shared by the formats: parsing without exceptions, and turning a
// parsed object into a ToolCall with OpenAI's argument normalisation.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "nlohmann/json.hpp"
#include "toolcall/tool_call_parser.h"

namespace baton::toolcall::internal {

// nullopt for text that is not one JSON value, or nests deeper than kMaxJsonDepth.
std::optional<nlohmann::json> ParseJson(std::string_view text);

// Compact text, the form ToolCall::arguments uses.
std::string DumpJson(const nlohmann::json& value);

// Arguments as compact object text: an object; a string holding an object (some models
// quote their arguments); null or absent → "{}". nullopt for anything else.
std::optional<std::string> NormalizeArguments(const nlohmann::json* arguments);

// A call from {name_key: "<non-empty string>", <one of argument_keys>: arguments}. The first
// argument key present is used. nullopt if `object` is not that shape.
std::optional<ToolCall> CallFromObject(const nlohmann::json& object, std::string_view name_key,
                                       std::initializer_list<std::string_view> argument_keys);

// The calls of a JSON array of call objects (every element must be one), or of a single call
// object; nullopt if any element is not a call or there are none.
std::optional<std::vector<ToolCall>> CallsFromJson(
    const nlohmann::json& value, std::string_view name_key,
    std::initializer_list<std::string_view> argument_keys);

}  // namespace baton::toolcall::internal
