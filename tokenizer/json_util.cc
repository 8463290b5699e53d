#include "tokenizer/json_util.h"

#include "common/status.h"
#include "common/strings.h"

namespace baton::tokenizer {

absl::StatusOr<std::string> JsonString(const nlohmann::json& j, std::string_view key,
                                       std::string_view where) {
  if (!j.is_object())
    return absl::InvalidArgumentError(baton::StrCat(where, ": expected an object"));
  auto it = j.find(std::string(key));
  if (it == j.end() || !it->is_string()) {
    return absl::InvalidArgumentError(
        baton::StrCat(where, ": field '", key, "' is missing or not a string"));
  }
  return it->get<std::string>();
}

absl::StatusOr<Pattern> ParsePattern(const nlohmann::json& j, std::string_view where) {
  auto it = j.find("pattern");
  if (it == j.end() || !it->is_object()) {
    return absl::InvalidArgumentError(baton::StrCat(where, ": field 'pattern' must be an object"));
  }
  Pattern p;
  if (it->contains("Regex") && (*it)["Regex"].is_string()) {
    BATON_ASSIGN_OR_RETURN(p.regex, Regex::Compile((*it)["Regex"].get<std::string>()));
    return p;
  }
  if (it->contains("String") && (*it)["String"].is_string()) {
    p.literal = (*it)["String"].get<std::string>();
    return p;
  }
  return absl::InvalidArgumentError(
      baton::StrCat(where, ": 'pattern' needs a 'String' or 'Regex' string"));
}

}  // namespace baton::tokenizer
