#include "engine/parallel/group_step.h"

#include "gtest/gtest.h"

namespace baton::engine {
namespace {

std::vector<model::SequenceInput> Batch(const std::vector<std::vector<int32_t>>& tokens,
                                        const std::vector<std::vector<int32_t>>& blocks) {
  std::vector<model::SequenceInput> out;
  for (size_t i = 0; i < tokens.size(); ++i) {
    out.push_back({tokens[i], static_cast<int64_t>(i * 3), blocks[i],
                   i % 2 ? model::LogitsWanted::kAll : model::LogitsWanted::kLast});
  }
  return out;
}

TEST(GroupStep, RoundTrips) {
  const std::vector<std::vector<int32_t>> tokens = {{1, 2, 3}, {4}, {5, 6}, {7}};
  const std::vector<std::vector<int32_t>> blocks = {{0}, {1, 2}, {3}, {4, 5, 6}};
  const auto batch = Batch(tokens, blocks);
  const GroupStep plan = PlanGroupStep(batch, 2);
  ASSERT_EQ(plan.micro_ends.size(), 2u);
  EXPECT_EQ(plan.micro_ends.back(), 4);
  auto decoded = DecodeGroupStep(StepOp::kForward, EncodeGroupStep(plan));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->micro_ends, plan.micro_ends);
  const auto inputs = decoded->Inputs();
  ASSERT_EQ(inputs.size(), batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    EXPECT_EQ(std::vector<int32_t>(inputs[i].tokens.begin(), inputs[i].tokens.end()), tokens[i]);
    EXPECT_EQ(std::vector<int32_t>(inputs[i].block_table.begin(), inputs[i].block_table.end()),
              blocks[i]);
    EXPECT_EQ(inputs[i].start_pos, batch[i].start_pos);
    EXPECT_EQ(inputs[i].logits, batch[i].logits);
  }
}

TEST(GroupStep, RoundTripsAPlanWithoutBlocks) {
  // Found by fuzz_group_step: no blocks at all must not hand memcpy a null pointer.
  const std::vector<std::vector<int32_t>> tokens = {{1}};
  const std::vector<std::vector<int32_t>> blocks = {{}};
  const GroupStep plan = PlanGroupStep(Batch(tokens, blocks), 1);
  auto decoded = DecodeGroupStep(StepOp::kForward, EncodeGroupStep(plan));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_TRUE(decoded->blocks.empty());
  EXPECT_EQ(EncodeGroupStep(*decoded), EncodeGroupStep(plan));
}

TEST(GroupStep, MicroBatchesCoverTheBatchWithOneSequenceAtLeastEach) {
  std::vector<std::vector<int32_t>> tokens, blocks;
  for (int i = 0; i < 7; ++i) {
    tokens.push_back(std::vector<int32_t>(i == 0 ? 100 : 1, 1));
    blocks.push_back({i});
  }
  const auto batch = Batch(tokens, blocks);
  for (int micro = 1; micro <= 9; ++micro) {
    const GroupStep plan = PlanGroupStep(batch, micro);
    ASSERT_EQ(static_cast<int>(plan.micro_ends.size()), std::min(micro, 7)) << micro;
    int32_t prev = 0;
    for (int32_t e : plan.micro_ends) {
      EXPECT_GT(e, prev);
      prev = e;
    }
    EXPECT_EQ(prev, 7);
  }
}

TEST(GroupStep, RejectsMalformedBytes) {
  const std::vector<std::vector<int32_t>> tokens = {{1, 2}, {3}};
  const std::vector<std::vector<int32_t>> blocks = {{0}, {1}};
  const std::string good = EncodeGroupStep(PlanGroupStep(Batch(tokens, blocks), 2));
  for (size_t cut = 0; cut < good.size(); ++cut) {
    EXPECT_FALSE(DecodeGroupStep(StepOp::kForward, good.substr(0, cut)).ok()) << cut;
  }
  EXPECT_FALSE(DecodeGroupStep(StepOp::kForward, good + "x").ok());
  std::string zero_seqs = good;
  zero_seqs[0] = zero_seqs[1] = zero_seqs[2] = zero_seqs[3] = 0;
  EXPECT_FALSE(DecodeGroupStep(StepOp::kForward, zero_seqs).ok());
  EXPECT_FALSE(DecodeGroupStep(StepOp::kKeepAlive, "x").ok());
  EXPECT_TRUE(DecodeGroupStep(StepOp::kShutdown, "").ok());
}

}  // namespace
}  // namespace baton::engine
