// Model::weight_inventory against the groups derived from the bundled model's
// config.json alone (tests/unit/capacity/config_shape.h), whole and as a shard.
#include "model/weight_inventory.h"

#include <utility>

#include "gtest/gtest.h"
#include "model/model.h"
#include "model/shard.h"
#include "tests/unit/capacity/config_shape.h"

namespace baton::model {
namespace {

using capacity::testing::InventoryFromShape;
using capacity::testing::kTinyDir;
using capacity::testing::Shape;
using capacity::testing::TinyShape;

void ExpectSame(const capacity::WeightInventory& got, const capacity::WeightInventory& want) {
  for (auto [g, w] : {std::pair{got.attn_q_o, want.attn_q_o},
                      {got.attn_k_v, want.attn_k_v},
                      {got.mlp, want.mlp},
                      {got.embedding, want.embedding},
                      {got.lm_head, want.lm_head}}) {
    EXPECT_EQ(g.bytes, w.bytes);
    EXPECT_EQ(g.elements, w.elements);
  }
  EXPECT_EQ(got.tied, want.tied);
  EXPECT_EQ(got.other_bytes, want.other_bytes);
}

TEST(WeightInventoryTest, BundledModelMatchesItsConfig) {
  const Shape s = TinyShape();
  OpenOptions options;
  options.prefault = false;
  auto m = Model::Open(kTinyDir, options);
  ASSERT_TRUE(m.ok()) << m.status();
  ExpectSame((*m)->weight_inventory(), InventoryFromShape(s));
  const capacity::ModelShape shape = ShapeOf((*m)->config());
  EXPECT_EQ(shape.layers, s.layers);
  EXPECT_EQ(shape.heads, s.heads);
  EXPECT_EQ(shape.kv_heads, s.kv_heads);
  EXPECT_EQ(shape.head_dim, s.head_dim);
  EXPECT_EQ(shape.hidden, s.hidden);
  EXPECT_EQ(shape.intermediate, s.inter);
  EXPECT_EQ(shape.vocab, s.vocab);
  EXPECT_EQ(shape.context, s.context);
}

TEST(WeightInventoryTest, AShardReportsItsWholeModel) {
  // A worker group's leader holds a slice but plans capacity for the whole model.
  auto full = Model::Open(kTinyDir);
  auto shard = OpenShard(kTinyDir, {0, 2, 0, 1});
  ASSERT_TRUE(full.ok() && shard.ok()) << shard.status();
  EXPECT_LT((*shard)->weight_bytes(), (*full)->weight_bytes());  // it holds half the matrices
  ExpectSame((*shard)->weight_inventory(), InventoryFromShape(TinyShape()));
}

}  // namespace
}  // namespace baton::model
