// Binding named tensors to the Weights of a Llama-family model, checking each against the
// config. The readers (safetensors, GGUF) fill a TensorTable; BindWeights looks up the
// names of the chosen scheme, checks rank, shape, type and size, and returns Weights whose
// matrices point into the tensors' bytes (no copy) and whose vectors are owned f32.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/cpu/matmul.h"
#include "model/model.h"
#include "model/model_config.h"

namespace baton::model {

struct TensorEntry {
  // Empty when the file stores a type Baton does not read; binding such a tensor fails
  // with `type_name` in the message, while unused tensors of any type are ignored.
  std::optional<cpu::DType> dtype;
  std::string type_name;       // as the format names it: "BF16", "q4_K (12)"...
  std::vector<int64_t> shape;  // outermost first: [out, in] for a linear weight
  std::string_view data;       // exactly the tensor's bytes
  std::string_view file;       // where it came from, for messages
};
using TensorTable = std::unordered_map<std::string, TensorEntry>;

enum class TensorNaming {
  kHf,    // model.layers.N.self_attn.q_proj.weight ...
  kGguf,  // blk.N.attn_q.weight ...
};

// Everything a loader produces; Model::Open adds the mapped files that own the bytes.
struct ModelParts {
  ModelConfig config;
  Weights weights;
  GenerationDefaults generation;
  uint64_t weight_bytes = 0;
};

// Binds every tensor of `config`'s architecture. A missing tensor, a wrong rank or shape,
// an unsupported type, a Q8_0 row not a multiple of 32, or misaligned data is an
// InvalidArgument naming the tensor. lm_head: HF `lm_head.weight` unless
// tie_word_embeddings; GGUF `output.weight`, or the embedding when absent (and then
// config->tie_word_embeddings becomes true). Biases: q/k/v required when
// config->attention_bias; any q/k/v/o bias present is bound (GGUF sets attention_bias
// from their presence). `weight_bytes` gets the bytes of every distinct tensor bound.
// One layer's tensor names in a file of `naming` (what BindWeights looks up).
struct LayerNames {
  std::string attn_norm, q, k, v, o, mlp_norm, gate, up, down;
  static std::string Bias(const std::string& weight) {
    return weight.substr(0, weight.size() - std::string_view("weight").size()) + "bias";
  }
};
LayerNames NamesFor(TensorNaming naming, int64_t layer);

absl::StatusOr<Weights> BindWeights(ModelConfig* config, const TensorTable& table,
                                    TensorNaming naming, uint64_t* weight_bytes);

}  // namespace baton::model
