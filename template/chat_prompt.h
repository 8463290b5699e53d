// Turns a chat request into prompt text with the model's own chat template, the way
// transformers' apply_chat_template does: the template sees messages, tools,
// add_generation_prompt and the BOS/EOS token texts of tokenizer_config.json.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace baton::templating {

// `request` is a JSON list of messages, or an object with "messages" and optionally
// "tools". It is ordered_json so that `tools | tojson` keeps the client's key order.
// InvalidArgument explains the expected shape when the request has another.
absl::StatusOr<std::string> RenderChatPrompt(const nlohmann::json& tokenizer_config,
                                             const nlohmann::ordered_json& request,
                                             bool add_generation_prompt,
                                             const std::string& template_name = "");

// The text of a special token entry of tokenizer_config.json ("bos_token": "<s>" or
// {"content": "<s>", ...}); empty when absent.
std::string ConfigTokenText(const nlohmann::json& tokenizer_config, const char* key);

}  // namespace baton::templating
