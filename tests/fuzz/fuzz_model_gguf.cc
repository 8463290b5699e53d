// Fuzzes the GGUF model loader: bytes -> gguf::File -> ModelConfig -> bound weights.
// Besides "no crash", every accepted model must have a valid config and matrices that lie
// inside the input with the shapes the config gives; the first and last row of every
// matrix are dequantized (any bytes are a valid block of every quantized type).
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "kernels/cpu/matmul.h"
#include "model/gguf_loader.h"

namespace {

void Require(bool cond) {
  if (!cond) std::abort();
}

void CheckMatrix(std::string_view bytes, const baton::cpu::MatrixRef& m, int64_t rows,
                 int64_t cols) {
  Require(m.rows == rows && m.cols == cols);
  const uint64_t n = static_cast<uint64_t>(rows) * baton::cpu::RowBytes(m.dtype, cols);
  const auto* p = static_cast<const char*>(m.data);
  Require(p >= bytes.data() && n <= bytes.size() &&
          p - bytes.data() <= static_cast<ptrdiff_t>(bytes.size() - n));
  if (rows == 0 || cols == 0) return;
  std::vector<float> row(static_cast<size_t>(cols));
  baton::cpu::DequantizeRow(m, 0, row.data());
  baton::cpu::DequantizeRow(m, rows - 1, row.data());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<baton::model::ModelParts> parts = baton::model::LoadGgufModel(bytes, "fuzz");
  if (!parts.ok()) {
    Require(!parts.status().message().empty());
    return 0;
  }
  const baton::model::ModelConfig& c = parts->config;
  const baton::model::Weights& w = parts->weights;
  Require(c.num_heads % c.num_kv_heads == 0 && c.head_dim % 2 == 0);
  CheckMatrix(bytes, w.embedding, c.vocab_size, c.hidden_size);
  CheckMatrix(bytes, w.lm_head, c.vocab_size, c.hidden_size);
  Require(w.layers.size() == static_cast<size_t>(c.num_layers));
  for (const baton::model::LayerWeights& l : w.layers) {
    CheckMatrix(bytes, l.q.weight, c.num_heads * c.head_dim, c.hidden_size);
    CheckMatrix(bytes, l.k.weight, c.num_kv_heads * c.head_dim, c.hidden_size);
    CheckMatrix(bytes, l.v.weight, c.num_kv_heads * c.head_dim, c.hidden_size);
    CheckMatrix(bytes, l.o.weight, c.hidden_size, c.num_heads * c.head_dim);
    CheckMatrix(bytes, l.gate.weight, c.intermediate_size, c.hidden_size);
    CheckMatrix(bytes, l.up.weight, c.intermediate_size, c.hidden_size);
    CheckMatrix(bytes, l.down.weight, c.hidden_size, c.intermediate_size);
    Require(static_cast<int64_t>(l.attn_norm.size()) == c.hidden_size);
    Require(static_cast<int64_t>(l.mlp_norm.size()) == c.hidden_size);
    Require(!c.attention_bias || static_cast<int64_t>(l.q.bias.size()) == l.q.weight.rows);
  }
  Require(static_cast<int64_t>(w.final_norm.size()) == c.hidden_size);
  Require(w.rope_freq_factors.empty() ||
          static_cast<int64_t>(w.rope_freq_factors.size()) == c.head_dim / 2);
  return 0;
}
