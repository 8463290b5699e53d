// Small checked accessors for tokenizer.json: every missing or mistyped field is an
// error that names it, never an exception.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "tokenizer/regex.h"

namespace baton::tokenizer {

absl::StatusOr<std::string> JsonString(const nlohmann::json& j, std::string_view key,
                                       std::string_view where);

// A "pattern" field: {"String": "..."} or {"Regex": "..."}.
struct Pattern {
  std::string literal;
  std::shared_ptr<const Regex> regex;  // set for Regex patterns
};
absl::StatusOr<Pattern> ParsePattern(const nlohmann::json& j, std::string_view where);

}  // namespace baton::tokenizer
