// The GPU step's host-side planning: what the packed lists hold for a mixed batch, how a
// decode-only batch is padded to a graph bucket, and which batches get no graph.
#include "model/arch/gpu_step.h"

#include <vector>

#include "gtest/gtest.h"

namespace baton::model {
namespace {

std::span<const int32_t> List(const GpuStepPlan& p, int64_t offset, int64_t n) {
  return std::span<const int32_t>(p.packed).subspan(offset, n);
}

std::vector<int32_t> Vec(std::span<const int32_t> s) { return {s.begin(), s.end()}; }

TEST(GpuStepPlan, MixedBatchListsEachSequenceWhereItsKernelReadsIt) {
  // block size 4: a decode token at position 9 (pages 7, 3, 5), a chunk of 3 tokens at
  // positions 4..6 after a cached prefix of 4 (pages 2, 8), and a 1-token prompt.
  const std::vector<int32_t> t0 = {11}, t1 = {21, 22, 23}, t2 = {31};
  const std::vector<int32_t> b0 = {7, 3, 5}, b1 = {2, 8}, b2 = {6};
  const std::vector<SequenceInput> batch = {
      {t0, 9, b0, LogitsWanted::kLast},
      {t1, 4, b1, LogitsWanted::kAll},
      {t2, 0, b2, LogitsWanted::kNone},
  };
  const GpuStepShape shape = GpuStepShapeOf(batch, 4);
  EXPECT_EQ(shape.tokens, 5);
  EXPECT_EQ(shape.decode_seqs, 2);  // one new token each: seq 0 and seq 2
  EXPECT_EQ(shape.prefill_seqs, 1);
  EXPECT_EQ(shape.decode_blocks, 3);
  EXPECT_EQ(shape.prefill_blocks, 2);
  EXPECT_EQ(shape.logit_rows, 4);
  EXPECT_EQ(shape.max_context, 10);
  EXPECT_EQ(shape.max_query_len, 3);

  GpuStepPlan p;
  ASSERT_TRUE(BuildGpuStepPlan(batch, 4, shape, &p).ok());
  for (int64_t off :
       {p.at.token_ids, p.at.positions, p.at.slot_pages, p.at.slot_rows, p.at.decode_rows,
        p.at.decode_context, p.at.decode_tables, p.at.prefill_starts, p.at.prefill_lens,
        p.at.prefill_context, p.at.prefill_tables, p.at.logit_rows, p.at.total}) {
    EXPECT_EQ(off % 4, 0) << "every list starts 16-byte aligned";
  }
  EXPECT_EQ(static_cast<int64_t>(p.packed.size()), p.at.total);
  EXPECT_EQ(Vec(List(p, p.at.token_ids, 5)), (std::vector<int32_t>{11, 21, 22, 23, 31}));
  EXPECT_EQ(Vec(List(p, p.at.positions, 5)), (std::vector<int32_t>{9, 4, 5, 6, 0}));
  EXPECT_EQ(Vec(List(p, p.at.slot_pages, 5)), (std::vector<int32_t>{5, 8, 8, 8, 6}));
  EXPECT_EQ(Vec(List(p, p.at.slot_rows, 5)), (std::vector<int32_t>{1, 0, 1, 2, 0}));
  EXPECT_EQ(Vec(List(p, p.at.decode_rows, 2)), (std::vector<int32_t>{0, 4}));
  EXPECT_EQ(Vec(List(p, p.at.decode_context, 2)), (std::vector<int32_t>{10, 1}));
  EXPECT_EQ(Vec(List(p, p.at.decode_tables, 6)), (std::vector<int32_t>{7, 3, 5, 6, 0, 0}));
  EXPECT_EQ(Vec(List(p, p.at.prefill_starts, 1)), (std::vector<int32_t>{1}));
  EXPECT_EQ(Vec(List(p, p.at.prefill_lens, 1)), (std::vector<int32_t>{3}));
  EXPECT_EQ(Vec(List(p, p.at.prefill_context, 1)), (std::vector<int32_t>{7}));
  EXPECT_EQ(Vec(List(p, p.at.prefill_tables, 2)), (std::vector<int32_t>{2, 8}));
  // kLast of seq 0 (row 0), kAll of seq 1 (rows 1-3), nothing for seq 2.
  EXPECT_EQ(Vec(List(p, p.at.logit_rows, 4)), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(p.real_tokens, 5);
  EXPECT_EQ(p.real_logit_rows, 4);
}

TEST(GpuStepPlan, AShapeTooSmallIsRefused) {
  const std::vector<int32_t> t = {1, 2, 3}, b = {0};
  const std::vector<SequenceInput> batch = {{t, 0, b, LogitsWanted::kLast}};
  GpuStepShape shape = GpuStepShapeOf(batch, 16);
  shape.max_query_len = 2;
  GpuStepPlan p;
  EXPECT_EQ(BuildGpuStepPlan(batch, 16, shape, &p).code(), absl::StatusCode::kInvalidArgument);
}

TEST(GpuStepGraphs, BucketsRoundUpAsVllmDoes) {
  EXPECT_EQ(GraphBatchBucket(1), 1);
  EXPECT_EQ(GraphBatchBucket(2), 2);
  EXPECT_EQ(GraphBatchBucket(3), 4);
  EXPECT_EQ(GraphBatchBucket(5), 8);
  EXPECT_EQ(GraphBatchBucket(9), 16);
  EXPECT_EQ(GraphBatchBucket(17), 24);
  EXPECT_EQ(GraphBatchBucket(256), 256);
  EXPECT_EQ(GraphContextBucket(1), 256);
  EXPECT_EQ(GraphContextBucket(256), 256);
  EXPECT_EQ(GraphContextBucket(257), 512);
  EXPECT_EQ(GraphContextBucket(5000), 8192);
}

TEST(GpuStepGraphs, ADecodeBatchIsPaddedWithRowsThatTouchNothing) {
  const std::vector<int32_t> t0 = {5}, t1 = {6}, t2 = {7};
  const std::vector<int32_t> b0 = {1}, b1 = {2, 4}, b2 = {3};
  const std::vector<SequenceInput> batch = {
      {t0, 3, b0, LogitsWanted::kLast},
      {t1, 20, b1, LogitsWanted::kLast},
      {t2, 0, b2, LogitsWanted::kLast},
  };
  const GpuStepShape g = GraphBucketFor(batch, 16, 1024);
  EXPECT_EQ(g.tokens, 4);
  EXPECT_EQ(g.decode_seqs, 4);
  EXPECT_EQ(g.prefill_seqs, 0);
  EXPECT_EQ(g.logit_rows, 4);
  EXPECT_EQ(g.max_context, 256);
  EXPECT_EQ(g.decode_blocks, 16);

  GpuStepPlan p;
  ASSERT_TRUE(BuildGpuStepPlan(batch, 16, g, &p).ok());
  EXPECT_EQ(p.at, GpuStepOffsets(g)) << "a bucket fixes every offset";
  EXPECT_EQ(Vec(List(p, p.at.token_ids, 4)), (std::vector<int32_t>{5, 6, 7, 0}));
  EXPECT_EQ(Vec(List(p, p.at.slot_pages, 4)), (std::vector<int32_t>{1, 4, 3, -1}));
  EXPECT_EQ(Vec(List(p, p.at.slot_rows, 4)), (std::vector<int32_t>{3, 4, 0, -1}));
  EXPECT_EQ(Vec(List(p, p.at.decode_rows, 4)), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(Vec(List(p, p.at.decode_context, 4)), (std::vector<int32_t>{4, 21, 1, 0}));
  EXPECT_EQ(Vec(List(p, p.at.logit_rows, 4)), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(p.real_logit_rows, 3);
  // Seq 1's table is its two pages, then zeros to the bucket's width.
  EXPECT_EQ(p.packed[p.at.decode_tables + 16], 2);
  EXPECT_EQ(p.packed[p.at.decode_tables + 17], 4);
  EXPECT_EQ(p.packed[p.at.decode_tables + 18], 0);
}

TEST(GpuStepGraphs, OnlyDecodeBatchesThatFitGetAGraph) {
  const std::vector<int32_t> one = {5}, two = {5, 6}, b = {0, 1, 2};
  const std::vector<SequenceInput> chunk = {{one, 3, b, LogitsWanted::kLast},
                                            {two, 0, b, LogitsWanted::kLast}};
  EXPECT_EQ(GraphBucketFor(chunk, 16, 1024).tokens, 0) << "a prefill chunk";
  const std::vector<SequenceInput> all = {{one, 3, b, LogitsWanted::kAll}};
  EXPECT_EQ(GraphBucketFor(all, 16, 1024).tokens, 0) << "prompt logits";
  const std::vector<SequenceInput> longer = {{one, 40, b, LogitsWanted::kLast}};
  EXPECT_EQ(GraphBucketFor(longer, 16, 32).tokens, 0) << "past the graphs' context";
  EXPECT_EQ(GraphBucketFor(longer, 16, 64).tokens, 1);
  std::vector<SequenceInput> many(9, SequenceInput{one, 3, b, LogitsWanted::kLast});
  EXPECT_EQ(GraphBucketFor(many, 16, 1024, 8).tokens, 0) << "more than the largest bucket";
  EXPECT_EQ(GraphBucketFor(many, 16, 1024, 16).tokens, 16);
}

}  // namespace
}  // namespace baton::model
