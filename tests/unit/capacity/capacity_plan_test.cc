// `baton plan`'s arithmetic against figures derived here from the shapes alone: the
// bundled model's config.json read with a JSON parser, and a Llama-3.1-8B-like config.
#include "capacity/capacity_plan.h"

#include <cmath>

#include "capacity/tp_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/capacity/config_shape.h"

namespace baton::capacity {
namespace {

using ::testing::HasSubstr;

using testing::ConfigOf;
using testing::InventoryFromShape;
using testing::Shape;
using testing::TinyShape;

// Llama-3.1-8B's published config.json: 32 layers, 32 heads, 8 KV heads, bf16.
Shape Llama8bShape() { return {32, 32, 8, 128, 4096, 14336, 128256, 131072, false, 2}; }

const DeviceSpec kDevice{"test", 80e9, 2e12, 300e12};

PlanRequest Request(int tp, int64_t max_len, int64_t prompt) {
  PlanRequest r;
  r.tp = tp;
  r.kv_element_bytes = 2;
  r.memory_utilization = 0.9;
  r.max_model_len = max_len;
  r.prompt_len = prompt;
  return r;
}

TEST(CapacityPlanTest, BundledModelOneRank) {
  const Shape s = TinyShape();
  const WeightInventory w = InventoryFromShape(s);
  auto p = PlanCapacity(ConfigOf(s), w, kDevice, Request(1, s.context, 100));
  ASSERT_TRUE(p.ok()) << p.status();
  const double kv_token = 2.0 * s.layers * s.kv_heads * s.head_dim * 2;
  EXPECT_EQ(p->kv_bytes_per_token_rank, kv_token);
  const double layer_bytes = s.weight_bytes * s.layers *
                             (2 * s.heads * s.head_dim * s.hidden +
                              2 * s.kv_heads * s.head_dim * s.hidden + 3 * s.hidden * s.inter);
  const double head_bytes =
      s.weight_bytes * s.vocab * s.hidden;  // the LM head (or the tied embedding)
  const double weights =
      layer_bytes + head_bytes * (s.tied ? 1 : 2) + s.weight_bytes * (2 * s.layers + 1) * s.hidden;
  EXPECT_DOUBLE_EQ(p->weight_bytes_rank, weights);
  EXPECT_DOUBLE_EQ(p->weight_bytes_total, weights);
  const double kv_memory = kDevice.memory_bytes * 0.9 - weights;
  EXPECT_DOUBLE_EQ(p->kv_cache_bytes_rank, kv_memory);
  EXPECT_EQ(p->tokens_fit, static_cast<int64_t>(std::floor(kv_memory / kv_token)));
  EXPECT_EQ(p->conversations_fit, p->tokens_fit / s.context);
  EXPECT_EQ(p->memory_batch_limit, p->tokens_fit / 100);
  // A decode step reads every layer matrix and the head (the embedding, when tied) once,
  // and 100 positions of KV.
  const double step = layer_bytes + head_bytes + 100 * kv_token;
  EXPECT_DOUBLE_EQ(p->decode_step_bytes_rank, step);
  EXPECT_DOUBLE_EQ(p->decode_floor_seconds, step / kDevice.bandwidth_bytes_s);
}

TEST(CapacityPlanTest, ComputeBoundBatchBalancesFlopsAndBytes) {
  const Shape s = Llama8bShape();
  const int64_t ctx = 200;
  auto p = PlanCapacity(ConfigOf(s), InventoryFromShape(s), kDevice, Request(1, 8192, ctx));
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_TRUE(p->compute_bound_batch.has_value());
  const double b = *p->compute_bound_batch;
  // The definition: at batch B, B sequences' FLOPs take as long as reading the weights
  // once and B sequences' KV.
  const double kv_seq = ctx * p->kv_bytes_per_token_rank;
  const double weights_read = p->decode_step_bytes_rank - kv_seq;
  EXPECT_NEAR(b * p->decode_flops_rank / kDevice.flops,
              (weights_read + b * kv_seq) / kDevice.bandwidth_bytes_s, 1e-12);
  // With no context it is the ridge point, FLOP/s over bytes/s, times bytes per FLOP/2.
  auto bare = PlanCapacity(ConfigOf(s), InventoryFromShape(s), kDevice, Request(1, 8192, 1));
  ASSERT_TRUE(bare.ok());
  EXPECT_NEAR(*bare->compute_bound_batch, kDevice.flops / kDevice.bandwidth_bytes_s, 2.0);
  EXPECT_LT(*bare->compute_bound_batch, b);  // attention's reads push it further out
  // At 1000 positions one sequence's KV (2 x 32 x 8 x 128 x 2 bytes a position) takes longer
  // to read than its FLOPs take: no batch turns compute-bound.
  const double kv_read = 1000 * 2.0 * 32 * 8 * 128 * 2 / kDevice.bandwidth_bytes_s;
  auto long_ctx = PlanCapacity(ConfigOf(s), InventoryFromShape(s), kDevice, Request(1, 8192, 1000));
  ASSERT_TRUE(long_ctx.ok());
  ASSERT_GT(kv_read, long_ctx->decode_flops_rank / kDevice.flops);
  EXPECT_FALSE(long_ctx->compute_bound_batch.has_value());
}

TEST(CapacityPlanTest, TensorParallelSplitsHeadsAndReplicatesKvPastThem) {
  const Shape s = Llama8bShape();
  const WeightInventory w = InventoryFromShape(s);
  auto one = PlanCapacity(ConfigOf(s), w, kDevice, Request(1, 8192, 512));
  auto two = PlanCapacity(ConfigOf(s), w, kDevice, Request(2, 8192, 512));
  auto sixteen = PlanCapacity(ConfigOf(s), w, kDevice, Request(16, 8192, 512));
  ASSERT_TRUE(one.ok() && two.ok() && sixteen.ok());
  EXPECT_EQ(one->kv_bytes_per_token_rank, 2.0 * 32 * 8 * 128 * 2);
  EXPECT_EQ(two->kv_bytes_per_token_rank, one->kv_bytes_per_token_rank / 2);
  EXPECT_EQ(two->kv_bytes_per_token_total, one->kv_bytes_per_token_rank);
  // 16 ranks over 8 KV heads: each holds one whole head, so the group stores each twice.
  EXPECT_EQ(sixteen->kv_heads_per_rank, 1);
  EXPECT_EQ(sixteen->kv_bytes_per_token_total, 2 * one->kv_bytes_per_token_rank);
  // Everything but the replicated vectors halves (the vocabulary divides evenly).
  EXPECT_DOUBLE_EQ(two->weight_bytes_rank,
                   (one->weight_bytes_rank - w.other_bytes) / 2 + w.other_bytes);
  EXPECT_DOUBLE_EQ(two->weight_bytes_total, one->weight_bytes_total + w.other_bytes);
  EXPECT_GT(two->tokens_fit, one->tokens_fit);
}

TEST(CapacityPlanTest, RefusalsNameTheFlag) {
  const Shape s = TinyShape();
  const WeightInventory w = InventoryFromShape(s);
  auto bad_tp = PlanCapacity(ConfigOf(s), w, kDevice, Request(3, s.context, 16));
  EXPECT_THAT(bad_tp.status().message(), HasSubstr("--tensor-parallel-size 3"));
  auto long_prompt = PlanCapacity(ConfigOf(s), w, kDevice, Request(1, 64, 65));
  EXPECT_THAT(long_prompt.status().message(), HasSubstr("--prompt-len 65"));
  auto long_model = PlanCapacity(ConfigOf(s), w, kDevice, Request(1, s.context + 1, 16));
  EXPECT_THAT(long_model.status().message(), HasSubstr("--max-model-len"));
  DeviceSpec small = kDevice;
  small.memory_bytes = 1e6;
  auto no_room = PlanCapacity(ConfigOf(s), w, small, Request(1, s.context, 16));
  EXPECT_THAT(no_room.status().message(), HasSubstr("--memory-gb"));
  EXPECT_THAT(KvElementBytes("int4").status().message(), HasSubstr("--kv-dtype 'int4'"));
  EXPECT_EQ(*KvElementBytes("fp8"), 1);
  EXPECT_EQ(*KvElementBytes("f32"), 4);
}

TEST(TpSplitTest, RefusesShapesNoModelHas) {
  // The router plans from shapes a worker sent: a zero count must be an error, not a
  // division by zero.
  ModelShape s = ConfigOf(Llama8bShape());
  s.kv_heads = 0;
  EXPECT_THAT(SplitForTp(s, 1).status().message(), HasSubstr("0 KV heads"));
  s.kv_heads = 5;  // 32 heads are not groups of 5
  EXPECT_THAT(SplitForTp(s, 1).status().message(), HasSubstr("not one a model can have"));
  s = ConfigOf(Llama8bShape());
  EXPECT_THAT(SplitForTp(s, 0).status().message(), HasSubstr("--tensor-parallel-size 0"));
  EXPECT_THAT(SplitForTp(s, 64).status().message(), HasSubstr("32 attention heads"));
  const auto split = SplitForTp(s, 16);
  ASSERT_TRUE(split.ok());
  EXPECT_TRUE(split->kv_replicated);
  EXPECT_EQ(split->heads, 2);
  EXPECT_EQ(split->kv_heads, 1);
  EXPECT_EQ(split->intermediate, 14336 / 16);
  EXPECT_EQ(split->vocab_shard, 128256 / 16);
}

}  // namespace
}  // namespace baton::capacity
