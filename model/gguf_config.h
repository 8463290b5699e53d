// GGUF metadata -> ModelConfig, for the architectures llama.cpp writes as "llama" (Llama
// 1-3, Mistral, TinyLlama, SmolLM2; "mistral" accepted too) and "qwen2".
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "common/gguf_file.h"
#include "model/model_config.h"

namespace baton::model {

inline constexpr std::string_view kSupportedGgufArchitectures = "llama, mistral, qwen2";

// Reads `<arch>.*` hyper-parameters, the vocabulary size (`<arch>.vocab_size` or the
// length of tokenizer.ggml.tokens) and the special ids, and validates them. rope_layout is
// kInterleaved for llama/mistral (llama.cpp's converter permutes Q/K rows) and kHalf for
// qwen2. tie_word_embeddings and attention_bias depend on which tensors exist; the weight
// binder sets them. `source` names the file in messages.
absl::StatusOr<ModelConfig> ConfigFromGguf(const gguf::File& file, std::string_view source);

}  // namespace baton::model
