// A traced request (EngineRequest::trace, docs/inspector.md) against the same request
// untraced: the same tokens, and steps that account for every prompt chunk and token.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/drain_stream.h"

namespace baton::engine {
namespace {

using ::baton::testing::Outcome;

const std::string kTiny = std::string(BATON_SOURCE_DIR) + "/models/baton-tiny";

struct Traced {
  Outcome out;
  std::vector<StepTrace> steps;
  bool truncated = false;
  int64_t logprob_events = 0;
  size_t event_top = 0;  // the most alternatives an event's logprob carried
};

Traced RunTraced(Engine* engine, EngineRequest r) {
  Traced t;
  absl::StatusOr<std::shared_ptr<RequestStream>> s = engine->Submit(std::move(r));
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return t;
  TokenEvent e;
  while ((*s)->Next(&e)) {
    t.out.ids.insert(t.out.ids.end(), e.token_ids.begin(), e.token_ids.end());
    t.out.text += e.text;
    t.logprob_events += static_cast<int64_t>(e.logprobs.size());
    for (const SampledToken& lp : e.logprobs)
      t.event_top = std::max(t.event_top, lp.top_logprobs.size());
    for (StepTrace& step : e.trace_steps) t.steps.push_back(std::move(step));
    t.truncated = t.truncated || e.trace_truncated;
    if (e.finished) t.out.last = e;
  }
  return t;
}

class TraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<LoadedModel> m = LoadModel(kTiny);
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::make_unique<LoadedModel>(std::move(*m));
    EngineOptions o;
    o.threads = 1;
    o.kv_cache_bytes = int64_t{16} << 20;
    o.max_prefill_chunk = 8;  // a 30-token prompt takes 4 chunks
    absl::StatusOr<std::unique_ptr<Engine>> e = Engine::Create(model_.get(), o);
    ASSERT_TRUE(e.ok()) << e.status();
    engine_ = *std::move(e);
  }

  EngineRequest Request(bool trace) const {
    EngineRequest r;
    for (int i = 0; i < 30; ++i) r.prompt_ids.push_back(300 + (i * 7) % 90);
    r.params.max_tokens = 12;
    r.params.temperature = 0.8;
    r.params.seed = 42;
    r.params.ignore_eos = true;
    r.trace = trace;
    return r;
  }

  std::unique_ptr<LoadedModel> model_;
  std::unique_ptr<Engine> engine_;
};

TEST_F(TraceTest, StepsAccountForEveryChunkAndToken) {
  const Traced plain = RunTraced(engine_.get(), Request(false));
  const Traced traced = RunTraced(engine_.get(), Request(true));
  ASSERT_TRUE(traced.out.last.status.ok()) << traced.out.last.status;
  EXPECT_EQ(traced.out.ids, plain.out.ids);  // tracing does not change what is sampled
  EXPECT_TRUE(plain.steps.empty());
  EXPECT_EQ(traced.logprob_events, 0);  // the trace's alternatives are not the client's logprobs
  EXPECT_FALSE(traced.truncated);

  // The prompt may partly come from the prefix cache (the untraced run left it there).
  const int64_t cached = traced.out.last.usage.cached_tokens;
  int64_t prompt_computed = 0;
  int64_t sampled = 0;
  int64_t context = cached;
  double last_start = -1;
  const int64_t per_token = engine_->kv_bytes_per_token();
  ASSERT_GT(per_token, 0);
  for (const StepTrace& s : traced.steps) {
    EXPECT_GT(s.start_seconds, last_start);
    last_start = s.start_seconds;
    EXPECT_GE(s.forward_seconds, 0);
    EXPECT_GE(s.batch_sequences, 1);
    EXPECT_GE(s.batch_tokens, s.tokens);
    context += s.tokens;
    EXPECT_EQ(s.context_tokens, context);
    EXPECT_EQ(s.kv_bytes, s.context_tokens * per_token);
    if (s.prefill) {
      prompt_computed += s.tokens;
      EXPECT_LE(s.tokens, 8);
    }
    if (!s.sampled) continue;
    EXPECT_EQ(s.sampled->id, traced.out.ids[sampled]);
    EXPECT_GE(s.sampled->top_logprobs.size(), static_cast<size_t>(kTraceTopLogprobs));
    ++sampled;
  }
  EXPECT_EQ(prompt_computed, 30 - cached);
  EXPECT_EQ(sampled, static_cast<int64_t>(traced.out.ids.size()));
  // Every step ends before the request does.
  const StepTrace& end = traced.steps.back();
  EXPECT_LE(end.start_seconds + end.forward_seconds + end.sample_seconds,
            traced.out.last.timings.total_seconds);
}

TEST_F(TraceTest, ClientLogprobsStayAsAsked) {
  EngineRequest r = Request(true);
  r.params.logprobs = 2;
  const Traced t = RunTraced(engine_.get(), r);
  ASSERT_TRUE(t.out.last.status.ok()) << t.out.last.status;
  EXPECT_EQ(t.logprob_events, static_cast<int64_t>(t.out.ids.size()));
  EXPECT_EQ(t.event_top, size_t{2});  // the events carry the two alternatives asked for
  for (const StepTrace& s : t.steps) {
    if (s.sampled) {
      EXPECT_GE(s.sampled->top_logprobs.size(), size_t{5});  // the trace, five
    }
  }
}

}  // namespace
}  // namespace baton::engine
