// Hugging Face config.json -> ModelConfig, generation_config.json -> GenerationDefaults.
//
// Supported architectures (config.json "architectures"[0], or "model_type" when that is
// absent): LlamaForCausalLM (Llama 2, Llama 3/3.1/3.2, TinyLlama, SmolLM2),
// MistralForCausalLM and Qwen2ForCausalLM (Qwen2, Qwen2.5). Anything else is refused with
// the list. docs/models.md maps each key to its field.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "model/model_config.h"

namespace baton::model {

inline constexpr std::string_view kSupportedHfArchitectures =
    "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM";

// Parses and validates config.json text. `source` names the file in messages. The result
// has rope_layout kHalf (HF checkpoints use rotate_half) and an empty `name` (the caller
// knows the directory).
absl::StatusOr<ModelConfig> ParseHfConfig(std::string_view json_text, std::string_view source);

// Parses generation_config.json text; absent or null fields keep GenerationDefaults'.
absl::StatusOr<GenerationDefaults> ParseGenerationConfig(std::string_view json_text,
                                                         std::string_view source);

}  // namespace baton::model
