// The text of a special token named in a Hugging Face tokenizer_config.json, which holds
// either a string ("bos_token": "<s>") or an AddedToken object ("bos_token": {"content":
// "<s>", ...}). Read by the tokenizer (to find the token's id) and by chat templates
// (which print it).
#pragma once

#include <string>

#include "nlohmann/json.hpp"

namespace baton {

// "" when `key` is absent, null or of another shape.
inline std::string SpecialTokenText(const nlohmann::json& tokenizer_config, const char* key) {
  if (!tokenizer_config.is_object() || !tokenizer_config.contains(key)) return "";
  const nlohmann::json& t = tokenizer_config[key];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_object() && t.contains("content") && t["content"].is_string()) {
    return t["content"].get<std::string>();
  }
  return "";
}

}  // namespace baton
