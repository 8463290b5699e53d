// Builds a Vocab from a Hugging Face tokenizer.json (model type BPE), optionally
// refined by the model's tokenizer_config.json (add_bos_token, bos/eos tokens).
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"
#include "tokenizer/vocab.h"

namespace baton::tokenizer {

// `config` is tokenizer_config.json's object, or null. `source` names the file in errors.
absl::StatusOr<Vocab> VocabFromTokenizerJson(std::string_view json_text,
                                             const nlohmann::json& config, std::string_view source);

}  // namespace baton::tokenizer
