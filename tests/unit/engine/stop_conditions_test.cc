// Token-level stops: EOS, stop_token_ids and the length limit, with OpenAI's finish reasons.
#include "engine/stop_conditions.h"

#include <vector>

#include "gtest/gtest.h"

namespace baton::engine {
namespace {

const std::vector<int32_t> kEos = {2, 9};

TEST(StopConditionsTest, FinishReasonNames) {
  EXPECT_EQ(FinishReasonName(FinishReason::kStop), "stop");
  EXPECT_EQ(FinishReasonName(FinishReason::kLength), "length");
  EXPECT_EQ(FinishReasonName(FinishReason::kNone), "");
}

TEST(StopConditionsTest, EosStopsWithoutItsText) {
  SamplingParams p;
  StopChecker checker(p, kEos);
  StopDecision d = checker.Check(5, 1);
  EXPECT_EQ(d.reason, FinishReason::kNone);
  EXPECT_TRUE(d.emit_text);
  for (int32_t eos : kEos) {
    d = checker.Check(eos, 2);
    EXPECT_EQ(d.reason, FinishReason::kStop);
    EXPECT_FALSE(d.stop_token_id.has_value());
    EXPECT_FALSE(d.emit_text);
  }
}

TEST(StopConditionsTest, IgnoreEosKeepsStopTokenIds) {
  SamplingParams p;
  p.ignore_eos = true;
  p.stop_token_ids = {7};
  StopChecker checker(p, kEos);
  EXPECT_EQ(checker.Check(2, 1).reason, FinishReason::kNone);
  StopDecision d = checker.Check(7, 2);
  EXPECT_EQ(d.reason, FinishReason::kStop);
  EXPECT_EQ(d.stop_token_id, 7);
  EXPECT_FALSE(d.emit_text);
}

TEST(StopConditionsTest, IncludeStopStrInOutputKeepsTheStopTokenText) {
  SamplingParams p;
  p.stop_token_ids = {7};
  p.include_stop_str_in_output = true;
  StopChecker checker(p, kEos);
  EXPECT_TRUE(checker.Check(7, 1).emit_text);
  EXPECT_TRUE(checker.Check(2, 1).emit_text);
}

TEST(StopConditionsTest, LengthAtMaxTokensOrContextButStopWins) {
  SamplingParams p;
  p.max_tokens = 3;
  StopChecker checker(p, kEos);
  EXPECT_EQ(checker.Check(5, 2).reason, FinishReason::kNone);
  StopDecision d = checker.Check(5, 3);
  EXPECT_EQ(d.reason, FinishReason::kLength);
  EXPECT_TRUE(d.emit_text);
  EXPECT_EQ(checker.Check(2, 3).reason, FinishReason::kStop);

  StopChecker context(p, kEos, /*context_room=*/2);
  EXPECT_EQ(context.Check(5, 2).reason, FinishReason::kLength);
}

}  // namespace
}  // namespace baton::engine
