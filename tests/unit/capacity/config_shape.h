// A model's shape and weight groups as a reader of its config.json sees them, derived
// independently of model/hf_config.cc and model/weight_inventory.cc: the oracle of the
// capacity and weight-inventory tests.
#pragma once

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "capacity/capacity_plan.h"
#include "capacity/model_shape.h"
#include "nlohmann/json.hpp"

namespace baton::capacity::testing {

inline const std::string kTinyDir = std::string(BATON_SOURCE_DIR) + "/models/baton-tiny";

struct Shape {
  int64_t layers, heads, kv_heads, head_dim, hidden, inter, vocab, context;
  bool tied;
  double weight_bytes;  // per element
};

inline Shape TinyShape() {
  std::ifstream in(kTinyDir + "/config.json");
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str());
  Shape s{};
  s.layers = j["num_hidden_layers"];
  s.heads = j["num_attention_heads"];
  s.kv_heads = j["num_key_value_heads"];
  s.hidden = j["hidden_size"];
  s.head_dim = j.contains("head_dim") ? j["head_dim"].get<int64_t>() : s.hidden / s.heads;
  s.inter = j["intermediate_size"];
  s.vocab = j["vocab_size"];
  s.context = j["max_position_embeddings"];
  s.tied = j.value("tie_word_embeddings", false);
  const std::string dtype = j["torch_dtype"];
  s.weight_bytes = dtype == "float32" ? 4 : 2;
  return s;
}

// What a file of this shape holds, tensor by tensor.
inline WeightInventory InventoryFromShape(const Shape& s) {
  auto group = [&](int64_t elements) {
    return TensorGroup{static_cast<uint64_t>(elements * s.weight_bytes),
                       static_cast<uint64_t>(elements)};
  };
  WeightInventory w;
  w.attn_q_o = group(s.layers * 2 * s.heads * s.head_dim * s.hidden);
  w.attn_k_v = group(s.layers * 2 * s.kv_heads * s.head_dim * s.hidden);
  w.mlp = group(s.layers * 3 * s.hidden * s.inter);
  w.embedding = group(s.vocab * s.hidden);
  w.tied = s.tied;
  if (!s.tied) w.lm_head = group(s.vocab * s.hidden);
  w.other_bytes = static_cast<uint64_t>((2 * s.layers + 1) * s.hidden * s.weight_bytes);  // norms
  return w;
}

inline ModelShape ConfigOf(const Shape& s) {
  return {s.layers, s.heads, s.kv_heads, s.head_dim, s.hidden, s.inter, s.vocab, s.context};
}

}  // namespace baton::capacity::testing
