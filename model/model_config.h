// What a model is, independent of the file it came from: the hyper-parameters of a
// Llama-family decoder, read from a Hugging Face config.json or GGUF metadata.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace baton::model {

// Where RoPE pairs its dimensions. HF checkpoints (and GGUF qwen2) rotate x[i] with
// x[i + head_dim/2] ("rotate_half"); GGUF llama files permute Q/K so that x[2i] pairs
// with x[2i+1]. Both give the same logits when the weights match the layout.
enum class RopeLayout { kHalf, kInterleaved };

struct RopeScaling {
  enum class Type { kNone, kLinear, kLlama3 };
  Type type = Type::kNone;
  double factor = 1.0;
  double low_freq_factor = 1.0;          // llama3
  double high_freq_factor = 4.0;         // llama3
  int64_t original_max_position = 8192;  // llama3
};

struct ModelConfig {
  std::string architecture;  // as the file names it: "LlamaForCausalLM", "llama", "qwen2"...
  std::string name;          // general.name or the directory name
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;  // GQA: num_heads % num_kv_heads == 0; MQA: 1
  int64_t head_dim = 0;      // hidden_size / num_heads unless the config says otherwise
  double rms_norm_eps = 1e-5;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  RopeLayout rope_layout = RopeLayout::kHalf;
  int64_t max_position_embeddings = 2048;  // the context length
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v biases (Qwen2)
  int32_t bos_token_id = -1;    // -1: none
  std::vector<int32_t> eos_token_ids;
};

// generation_config.json (HF) or the GGUF equivalents; absent fields keep these values.
struct GenerationDefaults {
  std::vector<int32_t> eos_token_ids;  // merged into the stop ids
  double temperature = 1.0;
  double top_p = 1.0;
  int64_t top_k = 0;  // 0: off
  double repetition_penalty = 1.0;
  bool do_sample = false;  // HF's flag; baton's CLI defaults stay explicit
};

// Upper bounds on every hyper-parameter. They are far above any released model of the
// supported families and keep a corrupt or hostile config from asking for absurd memory
// (a KV cache sized from max_position_embeddings, say) or overflowing products.
struct ConfigLimits {
  static constexpr int64_t kMaxVocab = int64_t{1} << 20;
  static constexpr int64_t kMaxHidden = int64_t{1} << 16;
  static constexpr int64_t kMaxIntermediate = int64_t{1} << 20;
  static constexpr int64_t kMaxLayers = 1024;
  static constexpr int64_t kMaxHeads = 1024;
  static constexpr int64_t kMaxHeadDim = 1024;
  static constexpr int64_t kMaxContext = int64_t{1} << 24;
};

// Checks what every loader must guarantee before weights are bound: positive sizes
// within ConfigLimits, num_heads % num_kv_heads == 0, an even head_dim, a positive
// finite eps and theta, sane RoPE scaling, and token ids inside the vocabulary.
// `source` prefixes the message (a file name). InvalidArgument names the field.
absl::Status ValidateModelConfig(const ModelConfig& config, const std::string& source);

}  // namespace baton::model
