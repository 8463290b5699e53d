// ValidateSamplingParams accepts every bound and rejects just past it, naming the
// parameter and the bound.
#include "engine/sampling_params.h"

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "common/param_error.h"
#include "gtest/gtest.h"

namespace baton::engine {
namespace {

constexpr int64_t kVocab = 1000;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct Case {
  std::string name;
  std::function<void(SamplingParams&)> set;
  std::vector<std::string> message_parts;  // all must appear in the error message
};

absl::Status Validate(const std::function<void(SamplingParams&)>& set) {
  SamplingParams params;
  set(params);
  return ValidateSamplingParams(params, kVocab);
}

TEST(SamplingParamsTest, DefaultsAreValid) {
  EXPECT_TRUE(ValidateSamplingParams(SamplingParams{}, kVocab).ok());
}

TEST(SamplingParamsTest, AcceptsEveryBound) {
  const std::vector<Case> cases = {
      {"greedy", [](SamplingParams& p) { p.temperature = 0; }, {}},
      {"max temperature", [](SamplingParams& p) { p.temperature = kMaxTemperature; }, {}},
      {"top_k -1", [](SamplingParams& p) { p.top_k = -1; }, {}},
      {"top_k 1", [](SamplingParams& p) { p.top_k = 1; }, {}},
      {"top_k vocab", [](SamplingParams& p) { p.top_k = kVocab; }, {}},
      {"tiny top_p", [](SamplingParams& p) { p.top_p = 1e-9; }, {}},
      {"min_p 1", [](SamplingParams& p) { p.min_p = 1; }, {}},
      {"repetition 2", [](SamplingParams& p) { p.repetition_penalty = 2; }, {}},
      {"repetition small", [](SamplingParams& p) { p.repetition_penalty = 1e-3; }, {}},
      {"penalties -2",
       [](SamplingParams& p) { p.presence_penalty = p.frequency_penalty = -2; },
       {}},
      {"penalties 2", [](SamplingParams& p) { p.presence_penalty = p.frequency_penalty = 2; }, {}},
      {"bias bounds",
       [](SamplingParams& p) {
         p.logit_bias = {{0, -100.0f}, {kVocab - 1, 100.0f}};
       },
       {}},
      {"logprobs 0", [](SamplingParams& p) { p.logprobs = 0; }, {}},
      {"logprobs max", [](SamplingParams& p) { p.logprobs = 20; }, {}},
      {"max_tokens 1", [](SamplingParams& p) { p.max_tokens = 1; }, {}},
      {"max_tokens max", [](SamplingParams& p) { p.max_tokens = SamplingLimits{}.max_tokens; }, {}},
      {"stop ids",
       [](SamplingParams& p) {
         p.stop_token_ids = {0, kVocab - 1};
       },
       {}},
      {"stop strings",
       [](SamplingParams& p) {
         p.stop.assign(16, std::string(256, 'x'));
         p.stop[0] = "\xE6\x97\xA5\xE6\x9C\xAC";
       },
       {}},
  };
  for (const Case& c : cases) {
    absl::Status status = Validate(c.set);
    EXPECT_TRUE(status.ok()) << c.name << ": " << status;
  }
}

TEST(SamplingParamsTest, EveryErrorNamesItsParameterAndBound) {
  const std::vector<Case> cases = {
      {"negative temperature",
       [](SamplingParams& p) { p.temperature = -0.5; },
       {"temperature", "[0, 100]", "-0.5"}},
      {"huge temperature",
       [](SamplingParams& p) { p.temperature = 101; },
       {"temperature", "[0, 100]", "101"}},
      {"NaN temperature", [](SamplingParams& p) { p.temperature = kNaN; }, {"temperature"}},
      {"top_k -2", [](SamplingParams& p) { p.top_k = -2; }, {"top_k", "1000", "-2"}},
      {"top_k > vocab", [](SamplingParams& p) { p.top_k = kVocab + 1; }, {"top_k", "1001"}},
      {"top_p 0", [](SamplingParams& p) { p.top_p = 0; }, {"top_p", "(0, 1]", "got 0"}},
      {"top_p 1.5", [](SamplingParams& p) { p.top_p = 1.5; }, {"top_p must be in (0, 1], got 1.5"}},
      {"NaN top_p", [](SamplingParams& p) { p.top_p = kNaN; }, {"top_p"}},
      {"min_p < 0", [](SamplingParams& p) { p.min_p = -0.1; }, {"min_p", "[0, 1]", "-0.1"}},
      {"min_p > 1", [](SamplingParams& p) { p.min_p = 1.1; }, {"min_p", "[0, 1]"}},
      {"NaN min_p", [](SamplingParams& p) { p.min_p = kNaN; }, {"min_p"}},
      {"repetition 0",
       [](SamplingParams& p) { p.repetition_penalty = 0; },
       {"repetition_penalty", "(0, 2]"}},
      {"repetition 2.5",
       [](SamplingParams& p) { p.repetition_penalty = 2.5; },
       {"repetition_penalty", "(0, 2]", "2.5"}},
      {"presence",
       [](SamplingParams& p) { p.presence_penalty = 2.01; },
       {"presence_penalty", "[-2, 2]", "2.01"}},
      {"frequency",
       [](SamplingParams& p) { p.frequency_penalty = -3; },
       {"frequency_penalty", "[-2, 2]", "-3"}},
      {"NaN frequency",
       [](SamplingParams& p) { p.frequency_penalty = kNaN; },
       {"frequency_penalty"}},
      {"bias value",
       [](SamplingParams& p) {
         p.logit_bias = {{5, 100.5f}};
       },
       {"logit_bias", "[-100, 100]", "100.5"}},
      {"bias id",
       [](SamplingParams& p) {
         p.logit_bias = {{kVocab, 1.0f}};
       },
       {"logit_bias", "[0, 1000)", "1000"}},
      {"bias negative id",
       [](SamplingParams& p) {
         p.logit_bias = {{-1, 1.0f}};
       },
       {"logit_bias", "[0, 1000)"}},
      {"bias duplicate",
       [](SamplingParams& p) {
         p.logit_bias = {{7, 1.0f}, {7, 2.0f}};
       },
       {"logit_bias", "7", "more than once"}},
      {"bias count",
       [](SamplingParams& p) {
         for (int32_t i = 0; i < 1025; ++i) p.logit_bias.emplace_back(i % kVocab, 0.0f);
       },
       {"logit_bias", "1024", "1025"}},
      {"logprobs -2", [](SamplingParams& p) { p.logprobs = -2; }, {"logprobs", "[0, 20]", "-2"}},
      {"logprobs 21", [](SamplingParams& p) { p.logprobs = 21; }, {"logprobs", "[0, 20]", "21"}},
      {"max_tokens 0",
       [](SamplingParams& p) { p.max_tokens = 0; },
       {"max_tokens", "[1, ", "got 0"}},
      {"max_tokens huge",
       [](SamplingParams& p) { p.max_tokens = SamplingLimits{}.max_tokens + 1; },
       {"max_tokens", "1048576"}},
      {"stop id",
       [](SamplingParams& p) {
         p.stop_token_ids = {3, kVocab};
       },
       {"stop_token_ids", "[0, 1000)", "1000"}},
      {"stop id count",
       [](SamplingParams& p) { p.stop_token_ids.assign(257, 1); },
       {"stop_token_ids", "256", "257"}},
      {"stop count", [](SamplingParams& p) { p.stop.assign(17, "x"); }, {"stop", "16", "17"}},
      {"empty stop",
       [](SamplingParams& p) {
         p.stop = {"a", ""};
       },
       {"stop[1]", "empty"}},
      {"long stop",
       [](SamplingParams& p) { p.stop = {std::string(257, 'x')}; },
       {"stop[0]", "256 bytes", "257"}},
      {"invalid UTF-8 stop", [](SamplingParams& p) { p.stop = {"a\xC3"}; }, {"stop[0]", "UTF-8"}},
  };
  for (const Case& c : cases) {
    absl::Status status = Validate(c.set);
    ASSERT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.name << ": " << status;
    const std::string message(status.message());
    // The parameter also travels with the status, for the client's error `param`.
    const std::string& first = c.message_parts.front();
    EXPECT_EQ(ParamOf(status),
              first.substr(0, first.find_first_not_of("abcdefghijklmnopqrstuvwxyz_")))
        << c.name;
    for (const std::string& part : c.message_parts) {
      EXPECT_NE(message.find(part), std::string::npos)
          << c.name << ": '" << message << "' lacks '" << part << "'";
    }
  }
}

TEST(SamplingParamsTest, LimitsAreConfigurable) {
  SamplingParams params;
  params.logprobs = 5;
  params.stop = {"a", "b"};
  SamplingLimits limits;
  limits.max_logprobs = 4;
  EXPECT_FALSE(ValidateSamplingParams(params, kVocab, limits).ok());
  limits.max_logprobs = 5;
  limits.max_stop_strings = 1;
  EXPECT_FALSE(ValidateSamplingParams(params, kVocab, limits).ok());
  limits.max_stop_strings = 2;
  EXPECT_TRUE(ValidateSamplingParams(params, kVocab, limits).ok());
}

}  // namespace
}  // namespace baton::engine
