// --chat-template FILE: a Jinja chat template for models that ship none (or to replace
// the one they ship), as vLLM's --chat-template. The file's text becomes the tokenizer
// config's "chat_template", so every renderer that reads the config uses it.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"

namespace baton::templating {

// Reads `path`, checks that it compiles as a template (the error names the file), and
// sets it as `tokenizer_config`'s chat_template. Templates above 1 MiB are refused.
absl::Status UseChatTemplateFile(const std::string& path, nlohmann::json* tokenizer_config);

}  // namespace baton::templating
