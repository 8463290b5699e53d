// A loaded model: its config and its weights, used in place from memory-mapped files.
//
//   BATON_ASSIGN_OR_RETURN(auto model, Model::Open("models/baton-tiny", {}));
//   model->weights().layers[0].q.weight  // a MatrixRef into the mapped file
//
// Open accepts a .gguf file, or a Hugging Face directory with config.json and
// model.safetensors (or model.safetensors.index.json with its shards). Large matrices
// stay in their stored type (f32, f16, bf16, GGUF Q8_0) and in the mapped file; only the
// small vectors (norm weights, biases, RoPE factors) are converted to owned f32.
// Every shape is checked against the config; a missing, misshaped or unsupported tensor
// is an InvalidArgument naming the tensor. An unsupported architecture is refused.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "capacity/capacity_plan.h"
#include "kernels/cpu/matmul.h"
#include "model/model_config.h"

namespace baton::model {

struct Linear {
  cpu::MatrixRef weight;    // [out_features, in_features]
  std::vector<float> bias;  // out_features floats, or empty
};

struct LayerWeights {
  std::vector<float> attn_norm;  // hidden_size
  Linear q, k, v, o;             // q: [heads*head_dim, hidden], k/v: [kv_heads*head_dim, hidden]
  std::vector<float> mlp_norm;   // hidden_size
  Linear gate, up, down;         // gate/up: [intermediate, hidden], down: [hidden, intermediate]
};

struct Weights {
  cpu::MatrixRef embedding;  // [vocab, hidden]
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;  // hidden_size
  cpu::MatrixRef lm_head;         // [vocab, hidden]; equals `embedding` when tied
  // Per-frequency divisors from a GGUF `rope_freqs.weight` (Llama 3 scaling baked in);
  // empty otherwise. head_dim/2 floats.
  std::vector<float> rope_freq_factors;
};

struct OpenOptions {
  // Called while the weights are paged in, with bytes done and the total, so a CLI can
  // show progress on a large model. May be empty.
  std::function<void(uint64_t done, uint64_t total)> progress;
  bool prefault = true;  // read every weight page once at load (steadier first tokens)
  // false: copy the files into anonymous huge-page memory instead of mapping them
  // (llama.cpp's --no-mmap). Costs a copy's worth of RAM beside the page cache.
  bool use_mmap = true;
  // Quantized matrices (all types but Q2_K and Q3_K) multiply activations rounded to 8-bit
  // blocks, as llama.cpp does (cpu::MatrixRef::int8_activations; `--quant-activations
  // int8`, the command lines' default); false: exact f32, the library's default, which the
  // oracle tests against llama.cpp's dequantized values use.
  bool int8_activations = false;
};

class Model {
 public:
  static absl::StatusOr<std::unique_ptr<Model>> Open(const std::string& path,
                                                     const OpenOptions& options = {});
  virtual ~Model() = default;

  const ModelConfig& config() const { return config_; }
  const Weights& weights() const { return weights_; }
  const GenerationDefaults& generation_defaults() const { return generation_; }
  const std::string& path() const { return path_; }
  const std::string& format() const { return format_; }    // "gguf" or "safetensors"
  uint64_t weight_bytes() const { return weight_bytes_; }  // bytes of all matrices and vectors
  // The whole model's weights in the groups tensor parallelism splits (model/
  // weight_inventory.h); a shard reports its full model's, for capacity planning.
  const capacity::WeightInventory& weight_inventory() const { return inventory_; }

 protected:
  Model() = default;
  ModelConfig config_;
  Weights weights_;
  GenerationDefaults generation_;
  std::string path_;
  std::string format_;
  uint64_t weight_bytes_ = 0;
  capacity::WeightInventory inventory_;
};

}  // namespace baton::model
