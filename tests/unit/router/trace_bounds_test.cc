// A traced request's bounds (docs/inspector.md): what the router refuses, naming the
// parameter, and the JSON size of the largest trace the workers' bounds allow.
#include <string>

#include "common/trace_bounds.h"
#include "dispatch/request_trace.h"
#include "frontdoor/openai/proto_json.h"
#include "frontdoor/openai/request_builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::router {
namespace {

using ::testing::HasSubstr;

frontdoor::OpenAiRequest Traced() {
  frontdoor::OpenAiRequest r;
  r.trace = true;
  r.max_tokens = 16;
  return r;
}

TEST(TraceBounds, RefusesWhatWouldOutgrowTheTrace) {
  EXPECT_TRUE(frontdoor::CheckTraceBounds(Traced(), 100).ok());

  frontdoor::OpenAiRequest n = Traced();
  n.n = 2;
  absl::Status s = frontdoor::CheckTraceBounds(n, 100);
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_THAT(s.message(), HasSubstr("n must be 1"));

  s = frontdoor::CheckTraceBounds(Traced(), kMaxTracePromptTokens + 1);
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_THAT(s.message(), HasSubstr("at most 8192 tokens"));

  frontdoor::OpenAiRequest big = Traced();
  big.max_tokens = kMaxTraceOutputTokens + 1;
  big.max_tokens_param = "max_completion_tokens";
  s = frontdoor::CheckTraceBounds(big, 100);
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_THAT(s.message(), HasSubstr("max_completion_tokens is 2049"));
  big.max_tokens = kMaxTraceOutputTokens;
  EXPECT_TRUE(frontdoor::CheckTraceBounds(big, kMaxTracePromptTokens).ok());
}

// The worst trace the bounds allow: the longest prompt with long token texts, and both
// workers at their step bound (kMaxTraceSteps), every prompt chunk with its layer groups
// and every possible token with its alternatives.
TEST(TraceBounds, LargestTraceStaysUnderTheStatedSize) {
  baton::v1::RequestTrace t;
  const std::string text(24, 'x');  // longer than almost every vocabulary's tokens
  t.set_rendered_prompt(std::string(kMaxTracePromptTokens * text.size(), 'x'));
  for (int64_t i = 0; i < kMaxTracePromptTokens; ++i) {
    baton::v1::TraceToken* tok = t.add_prompt_tokens();
    tok->set_id(128000 + static_cast<int32_t>(i));
    tok->set_text(text);
  }
  auto fill = [&](baton::v1::StepTrace* s, int64_t i, bool prefill, bool sampled) {
    s->set_start_seconds(1.234567891 + static_cast<double>(i));
    s->set_forward_seconds(0.0123456789);
    s->set_sample_seconds(0.000123456789);
    s->set_kv_wait_seconds(0.000123456789);
    s->set_batch_sequences(256);
    s->set_batch_tokens(2048);
    s->set_tokens(prefill ? 512 : 1);
    s->set_context_tokens(10000 + i);
    s->set_prefill(prefill);
    s->set_kv_bytes(int64_t{1} << 40);
    if (prefill) {
      for (int g = 0; g < kTraceLayerGroups; ++g) {
        baton::v1::LayerGroupTrace* lg = s->add_layer_groups();
        lg->set_first_layer(g * 16);
        lg->set_layers(16);
        lg->set_done_seconds(0.00123456789);
        lg->set_kv_bytes(int64_t{1} << 30);
      }
    }
    if (!sampled) return;
    s->set_sampled(true);
    s->mutable_chosen()->set_id(128000);
    s->mutable_chosen()->set_text(text);
    s->mutable_chosen()->set_logprob(-1.2345678f);
    for (int k = 0; k < kTraceTopLogprobs; ++k) {
      baton::v1::TraceCandidate* c = s->add_top();
      c->set_id(128000 + k);
      c->set_text(text);
      c->set_logprob(-1.2345678f);
    }
  };
  for (size_t i = 0; i < kMaxTraceSteps; ++i) {
    fill(t.mutable_prefill()->add_steps(), static_cast<int64_t>(i), true, i + 1 == kMaxTraceSteps);
  }
  for (size_t i = 0; i < kMaxTraceSteps; ++i) {
    fill(t.add_steps(), static_cast<int64_t>(i), false, std::cmp_less(i, kMaxTraceOutputTokens));
  }
  for (int i = 0; i < 64; ++i) t.mutable_route()->add_candidates()->set_worker("10.0.0.1:50061");
  const size_t bytes = frontdoor::ProtoToJson(t).dump().size();
  std::printf("largest trace: %zu bytes of JSON (bound %lld)\n", bytes,
              static_cast<long long>(kMaxTraceJsonBytes));
  EXPECT_LT(bytes, static_cast<size_t>(kMaxTraceJsonBytes));
}

}  // namespace
}  // namespace baton::router
