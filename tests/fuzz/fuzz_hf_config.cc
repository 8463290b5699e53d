// Fuzzes config.json and generation_config.json parsing. Whatever is accepted must
// satisfy the invariants the rest of Baton relies on (ValidateModelConfig's promises).
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "model/hf_config.h"

namespace {

void Require(bool cond) {
  if (!cond) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<baton::model::ModelConfig> c = baton::model::ParseHfConfig(text, "fuzz");
  if (c.ok()) {
    Require(c->vocab_size > 0 && c->hidden_size > 0 && c->num_layers > 0);
    Require(c->num_kv_heads > 0 && c->num_heads % c->num_kv_heads == 0);
    Require(c->head_dim > 0 && c->head_dim % 2 == 0);
    Require(c->max_position_embeddings > 0);
    Require(c->rms_norm_eps > 0 && c->rope_theta > 0);
    for (int32_t id : c->eos_token_ids) Require(id >= 0 && id < c->vocab_size);
    Require(c->bos_token_id >= -1 && c->bos_token_id < c->vocab_size);
  } else {
    Require(!c.status().message().empty());
  }
  absl::StatusOr<baton::model::GenerationDefaults> g =
      baton::model::ParseGenerationConfig(text, "fuzz");
  if (g.ok()) {
    Require(g->top_p > 0 && g->top_p <= 1 && g->top_k >= 0 && g->temperature >= 0);
  }
  return 0;
}
