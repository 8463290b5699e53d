// Random-weight models of real shapes, for tests and benchmarks without downloads.
//
//   BATON_ASSIGN_OR_RETURN(ModelConfig config, SyntheticShape("smollm2-135m"));
//   BATON_RETURN_IF_ERROR(WriteSyntheticModel({.config = config, .seed = 1}, "out/smollm2"));
//
// The directory gets a Hugging Face model (config.json, generation_config.json,
// model.safetensors, tokenizer.json, tokenizer_config.json) and/or model.gguf holding the
// same weights (for GGUF llama the Q/K rows permuted to the interleaved rotary layout, as
// llama.cpp's converter does; vectors widened to f32 as it does). Weights are uniform
// random with variance 1/in_features (embeddings: 1/hidden_size), norm weights in
// [0.9, 1.1], biases in [-0.02, 0.02]: activations stay O(1) through any depth and the
// logits are neither flat nor saturated. Every value depends only on the seed, the
// tensor's name and its position, so the HF and GGUF copies agree and a rerun is
// byte-identical.
//
// The tokenizer is a minimal byte-level BPE: 256 byte tokens (id = byte value), a few
// merges, and <|endoftext|> as BOS/EOS; the config's vocab_size may be larger (the
// embedding rows past the tokenizer are never produced, as in real padded vocabularies).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/cpu/matmul.h"
#include "model/model_config.h"

namespace baton::modelgen {

struct SyntheticModelSpec {
  // Architecture LlamaForCausalLM or Qwen2ForCausalLM. bos/eos ids are replaced by the
  // synthetic tokenizer's <|endoftext|>.
  model::ModelConfig config = {};
  // Matrices. The block-quantized types are GGUF-only; q8_0 quantizes the values, the
  // others are well-formed random blocks, not the values (tests and fuzz seeds).
  cpu::DType dtype = cpu::DType::kBF16;
  uint64_t seed = 0;
  bool write_hf = true;
  bool write_gguf = true;
  std::string name = {};  // general.name in the GGUF; defaults to the directory name
  // Bytes written so far and the total over all files, after each tensor. May be empty.
  std::function<void(uint64_t done, uint64_t total)> progress = {};
};

// The synthetic tokenizer's size and its <|endoftext|> id (BOS and EOS).
inline constexpr int32_t kSyntheticEosId = 264;
inline constexpr int32_t kSyntheticTokenizerSize = 265;

// Named shapes: "tiny" (2 layers, hidden 64, untied; for tests), "smollm2-135m",
// "llama3.2-1b" (with Llama 3 RoPE scaling).
absl::StatusOr<model::ModelConfig> SyntheticShape(std::string_view name);
std::vector<std::string> SyntheticShapeNames();

absl::Status WriteSyntheticModel(const SyntheticModelSpec& spec, const std::string& out_dir);

// In-memory forms, for tests and fuzz seeds. They allow a vocab_size below the
// tokenizer's: then the GGUF carries no tokenizer metadata and the last id is EOS.
absl::StatusOr<std::string> SyntheticConfigJson(const SyntheticModelSpec& spec);
absl::StatusOr<std::string> SyntheticSafetensorsBytes(const SyntheticModelSpec& spec);
absl::StatusOr<std::string> SyntheticGgufBytes(const SyntheticModelSpec& spec);

// The byte-level tokenizer files, as text (also used by tests of other layers).
std::string SyntheticTokenizerJson();
std::string SyntheticTokenizerConfigJson(int64_t model_max_length);

}  // namespace baton::modelgen
