#include "tools/weight_inventory.h"

namespace baton::tools {
namespace {

TensorGroup GroupOf(const cpu::MatrixRef& m) {
  return {static_cast<uint64_t>(m.rows) * cpu::RowBytes(m.dtype, m.cols),
          static_cast<uint64_t>(m.rows) * static_cast<uint64_t>(m.cols)};
}

void Add(TensorGroup& to, const cpu::MatrixRef& m) {
  const TensorGroup g = GroupOf(m);
  to.bytes += g.bytes;
  to.elements += g.elements;
}

}  // namespace

WeightInventory InventoryOf(const model::Model& model) {
  const model::Weights& w = model.weights();
  WeightInventory inv;
  for (const model::LayerWeights& l : w.layers) {
    Add(inv.attn_q_o, l.q.weight);
    Add(inv.attn_q_o, l.o.weight);
    Add(inv.attn_k_v, l.k.weight);
    Add(inv.attn_k_v, l.v.weight);
    for (const model::Linear* lin : {&l.gate, &l.up, &l.down}) Add(inv.mlp, lin->weight);
  }
  inv.embedding = GroupOf(w.embedding);
  inv.tied = w.lm_head.data == w.embedding.data;
  if (!inv.tied) inv.lm_head = GroupOf(w.lm_head);
  // Model::weight_bytes counts every tensor once (a tied head once); the rest are the
  // vectors: norms, biases, RoPE factors.
  const uint64_t matrices = inv.attn_q_o.bytes + inv.attn_k_v.bytes + inv.mlp.bytes +
                            inv.embedding.bytes + inv.lm_head.bytes;
  inv.other_bytes = model.weight_bytes() > matrices ? model.weight_bytes() - matrices : 0;
  return inv;
}

}  // namespace baton::tools
