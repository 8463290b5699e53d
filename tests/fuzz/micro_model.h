// Model shapes small enough for fuzz seeds (a few KB each), shared by the model fuzzers
// and the unit test that checks and regenerates their seeds.
#pragma once

#include <string>
#include <vector>

#include "model/model_config.h"
#include "modelgen/synthetic_model.h"

namespace baton::model::testing {

// One layer, 2 heads, GQA 2:1. With `q8_compatible`, every in-feature count is a
// multiple of 32 (Q8_0 blocks) and the head is untied.
inline ModelConfig MicroConfig(std::string architecture = "LlamaForCausalLM",
                               bool q8_compatible = false) {
  ModelConfig c;
  c.architecture = std::move(architecture);
  c.vocab_size = q8_compatible ? 8 : 16;
  c.hidden_size = q8_compatible ? 32 : 8;
  c.intermediate_size = q8_compatible ? 32 : 16;
  c.num_layers = 1;
  c.num_heads = 2;
  c.num_kv_heads = 1;
  c.head_dim = q8_compatible ? 16 : 4;
  c.max_position_embeddings = 64;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 10000;
  c.tie_word_embeddings = !q8_compatible;
  return c;
}

// The smallest shape whose rows are whole K-quant super-blocks (256 values): one layer,
// hidden 256, 2 heads of 128, GQA 2:1, 8 tokens, untied head.
inline ModelConfig KQuantMicroConfig() {
  ModelConfig c = MicroConfig("LlamaForCausalLM", /*q8_compatible=*/true);
  c.hidden_size = 256;
  c.intermediate_size = 256;
  c.head_dim = 128;
  return c;
}

// config.json texts the safetensors fuzzer binds each input against.
inline std::vector<std::string> MicroConfigJsons() {
  std::vector<std::string> out;
  for (const char* arch : {"LlamaForCausalLM", "Qwen2ForCausalLM"}) {
    modelgen::SyntheticModelSpec spec;
    spec.config = MicroConfig(arch);
    spec.dtype = cpu::DType::kF32;
    out.push_back(*modelgen::SyntheticConfigJson(spec));
  }
  return out;
}

}  // namespace baton::model::testing
