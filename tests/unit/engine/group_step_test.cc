#include "engine/parallel/group_step.h"

#include <cstring>
#include <string>
#include <vector>

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

TEST(GroupStep, KvPushRoundTripsAndReachesTheInputs) {
  const std::vector<std::vector<int32_t>> tokens = {{1, 2, 3}, {4}, {5, 6}, {7}};
  const std::vector<std::vector<int32_t>> blocks = {{0}, {1, 2}, {3}, {4, 5, 6}};
  const uint64_t pushes[] = {0, 0xdeadbeefcafef00dull, 1, ~uint64_t{0}};
  auto batch = Batch(tokens, blocks);
  for (size_t i = 0; i < batch.size(); ++i) batch[i].kv_push = pushes[i];
  const GroupStep plan = PlanGroupStep(batch, 2);
  ASSERT_EQ(plan.seqs.size(), batch.size());
  for (size_t i = 0; i < batch.size(); ++i) EXPECT_EQ(plan.seqs[i].kv_push, pushes[i]) << i;

  const std::string bytes = EncodeGroupStep(plan);
  // The wire form of the header: 28 bytes a sequence, the push last.
  ASSERT_EQ(bytes.size(), 8 + 4 * 28 + (2 + 7 + 7) * 4u);
  uint64_t wire_push = 0;
  std::memcpy(&wire_push, bytes.data() + 8 + 28 + 20, sizeof(wire_push));
  EXPECT_EQ(wire_push, pushes[1]);

  auto decoded = DecodeGroupStep(StepOp::kForward, bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->op, StepOp::kForward);
  ASSERT_EQ(decoded->seqs.size(), batch.size());
  const auto inputs = decoded->Inputs();
  ASSERT_EQ(inputs.size(), batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    EXPECT_EQ(decoded->seqs[i].kv_push, pushes[i]) << i;
    EXPECT_EQ(inputs[i].kv_push, pushes[i]) << i;
    EXPECT_EQ(std::vector<int32_t>(inputs[i].tokens.begin(), inputs[i].tokens.end()), tokens[i]);
    EXPECT_EQ(inputs[i].start_pos, batch[i].start_pos);
    EXPECT_EQ(inputs[i].logits, batch[i].logits);
  }
  EXPECT_EQ(EncodeGroupStep(*decoded), bytes);

  // A plan built by hand keeps its pushes too.
  GroupStep manual;
  manual.seqs = {{5, 1, 1, model::LogitsWanted::kLast, 42}};
  manual.micro_ends = {1};
  manual.tokens = {9};
  manual.blocks = {3};
  auto back = DecodeGroupStep(StepOp::kForward, EncodeGroupStep(manual));
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->Inputs().size(), 1u);
  EXPECT_EQ(back->Inputs()[0].kv_push, 42u);
  EXPECT_EQ(back->Inputs()[0].start_pos, 5);
}

TEST(GroupStep, CallCarriesItsBodyOpaque) {
  auto plan = DecodeGroupStep(StepOp::kCall, "abc");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->op, StepOp::kCall);
  EXPECT_EQ(plan->call, "abc");
  EXPECT_TRUE(plan->seqs.empty());
  EXPECT_TRUE(plan->Inputs().empty());

  // Any bytes, even ones that would be a malformed forward plan.
  const std::string binary("\x00\xff\x01\x00", 4);
  auto raw = DecodeGroupStep(StepOp::kCall, binary);
  ASSERT_TRUE(raw.ok()) << raw.status();
  EXPECT_EQ(raw->call, binary);
  auto empty = DecodeGroupStep(StepOp::kCall, "");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->call.empty());

  // A forward plan never carries a call body.
  const GroupStep forward = PlanGroupStep(Batch({{1}}, {{0}}), 1);
  auto decoded = DecodeGroupStep(StepOp::kForward, EncodeGroupStep(forward));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_TRUE(decoded->call.empty());
}

}  // namespace
}  // namespace baton::engine
