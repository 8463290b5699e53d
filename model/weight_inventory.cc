#include "model/weight_inventory.h"

namespace baton::model {
namespace {

capacity::TensorGroup GroupOf(const cpu::MatrixRef& m) {
  return {static_cast<uint64_t>(m.rows) * cpu::RowBytes(m.dtype, m.cols),
          static_cast<uint64_t>(m.rows) * static_cast<uint64_t>(m.cols)};
}

void Add(capacity::TensorGroup& to, const cpu::MatrixRef& m) {
  const capacity::TensorGroup g = GroupOf(m);
  to.bytes += g.bytes;
  to.elements += g.elements;
}

}  // namespace

capacity::WeightInventory InventoryOf(const Weights& w, uint64_t weight_bytes) {
  capacity::WeightInventory inv;
  for (const LayerWeights& l : w.layers) {
    Add(inv.attn_q_o, l.q.weight);
    Add(inv.attn_q_o, l.o.weight);
    Add(inv.attn_k_v, l.k.weight);
    Add(inv.attn_k_v, l.v.weight);
    for (const Linear* lin : {&l.gate, &l.up, &l.down}) Add(inv.mlp, lin->weight);
  }
  inv.embedding = GroupOf(w.embedding);
  inv.tied = w.lm_head.data == w.embedding.data;
  if (!inv.tied) inv.lm_head = GroupOf(w.lm_head);
  // weight_bytes counts every tensor once (a tied head once); the rest are the vectors:
  // norms, biases, RoPE factors.
  const uint64_t matrices = inv.attn_q_o.bytes + inv.attn_k_v.bytes + inv.mlp.bytes +
                            inv.embedding.bytes + inv.lm_head.bytes;
  inv.other_bytes = weight_bytes > matrices ? weight_bytes - matrices : 0;
  return inv;
}

capacity::ModelShape ShapeOf(const ModelConfig& c) {
  return {c.num_layers,  c.num_heads,         c.num_kv_heads, c.head_dim,
          c.hidden_size, c.intermediate_size, c.vocab_size,   c.max_position_embeddings};
}

}  // namespace baton::model
