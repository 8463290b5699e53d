// Loads a tokenizer from what users point at: a tokenizer.json, a GGUF file, or a
// model directory holding either (with tokenizer_config.json beside it).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "tokenizer/tokenizer.h"

namespace baton::tokenizer {

struct TokenizerFiles {
  std::shared_ptr<const Tokenizer> tokenizer;
  // tokenizer_config.json, or for a GGUF the same fields made from its metadata
  // (chat_template, bos_token, eos_token). An empty object when there is none.
  nlohmann::json config = nlohmann::json::object();
};

struct LoadOptions {
  size_t max_json_bytes = size_t{512} << 20;
  TokenizerLimits limits;
};

absl::StatusOr<TokenizerFiles> LoadTokenizerFiles(const std::string& path,
                                                  const LoadOptions& options = {});

}  // namespace baton::tokenizer
