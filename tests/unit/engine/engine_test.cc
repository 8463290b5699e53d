// The continuous-batching engine against the single-sequence path (Generate): many
// concurrent requests with shared prefixes, different lengths and seeds give exactly the
// tokens and text each gives alone, with and without the prefix cache, under forced
// preemption and with cancellations; afterwards every page is free.
#include "engine/engine.h"

#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/strings.h"
#include "engine/generator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/drain_stream.h"

namespace baton::engine {
namespace {

using ::baton::testing::Drain;
using ::baton::testing::Outcome;

using ::testing::HasSubstr;

const std::string kTiny = std::string(BATON_SOURCE_DIR) + "/models/baton-tiny";
const std::string kStories =
    std::string(BATON_TESTDATA_DIR) + "/models/stories260K/stories260K.gguf";

const LoadedModel* Load(const std::string& path) {
  static std::map<std::string, std::unique_ptr<LoadedModel>> cache;
  auto& slot = cache[path];
  if (!slot) {
    absl::StatusOr<LoadedModel> m = LoadModel(path);
    if (!m.ok()) {
      ADD_FAILURE() << m.status();
      return nullptr;
    }
    slot = std::make_unique<LoadedModel>(std::move(*m));
  }
  return slot.get();
}

struct Expected {
  std::vector<int32_t> ids;
  std::string text;
  std::string finish_reason;
};

// Requests with a shared 40-token prefix (two families), varied suffixes, lengths,
// sampling settings and seeds.
std::vector<EngineRequest> MakeRequests(const LoadedModel& m, int n, uint32_t seed) {
  std::mt19937 rng(seed);
  const int32_t vocab = static_cast<int32_t>(
      std::min<int64_t>(m.model->config().vocab_size, m.tokenizer.tokenizer->vocab_size()));
  std::vector<std::vector<int32_t>> prefixes(2);
  for (auto& p : prefixes) {
    for (int i = 0; i < 40; ++i) p.push_back(3 + static_cast<int32_t>(rng() % (vocab - 3)));
  }
  std::vector<EngineRequest> out;
  for (int i = 0; i < n; ++i) {
    EngineRequest r;
    r.id = StrCat("r", i);
    if (i % 4 != 3) r.prompt_ids = prefixes[i % 2];
    const int extra = 1 + static_cast<int>(rng() % 37);
    for (int k = 0; k < extra; ++k)
      r.prompt_ids.push_back(3 + static_cast<int32_t>(rng() % (vocab - 3)));
    r.params.max_tokens = 4 + static_cast<int64_t>(rng() % 40);
    if (i % 4 == 2) {
      // Long enough that a cancel after the first token lands while it runs.
      r.params.max_tokens = 60;
      r.params.ignore_eos = true;
    }
    r.params.seed = 1000 + i;
    if (i % 3 == 0) {
      r.params.temperature = 0;
    } else {
      r.params.temperature = 0.8;
      r.params.top_p = 0.95;
      r.params.top_k = i % 2 == 0 ? 40 : 0;
    }
    if (i % 5 == 1) r.params.logprobs = 2;
    out.push_back(std::move(r));
  }
  return out;
}

Expected Alone(const LoadedModel& m, const EngineRequest& r) {
  ThreadPool threads(2);
  absl::StatusOr<GenerateResult> g = Generate(m, &threads, r.prompt_ids, r.params, {}, nullptr);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return {};
  return {g->output_ids, g->text, g->finish_reason};
}

EngineOptions SmallOptions() {
  EngineOptions o;
  o.threads = 2;
  o.kv_cache_bytes = int64_t{64} << 20;
  o.max_batched_tokens = 96;
  o.max_prefill_chunk = 32;
  o.max_running = 8;
  return o;
}

void ExpectNoLeaks(Engine* engine) {
  engine->WaitIdle();
  const EngineStats s = engine->Stats();
  EXPECT_EQ(s.running, 0);
  EXPECT_EQ(s.waiting, 0);
  EXPECT_EQ(s.pages_used, 0);
  EXPECT_EQ(s.pages_free, s.pages_total);
}

struct Variant {
  std::string name;
  bool prefix_cache = true;
  bool tiny_pool = false;  // forces preemption
  bool cancel_some = false;
};

void RunEquivalence(const LoadedModel& m, const Variant& v) {
  SCOPED_TRACE(v.name);
  const std::vector<EngineRequest> requests = MakeRequests(m, 16, 7);
  std::vector<Expected> expected;
  for (const EngineRequest& r : requests) expected.push_back(Alone(m, r));

  EngineOptions o = SmallOptions();
  o.enable_prefix_cache = v.prefix_cache;
  if (v.tiny_pool) {
    // Room for the largest request alone (40 + 37 + 60 tokens) and a little more.
    o.kv_cache_bytes =
        12 * PageLayoutFor(m.model->config(), o.block_size, o.kv_cache_dtype).page_bytes();
  }
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(&m, o);
  ASSERT_TRUE(engine.ok()) << engine.status();

  std::set<kvcache::BlockHash> from_events;
  (*engine)->kv_events().Subscribe([&](const kvcache::KvEventBatch& b) {
    for (const kvcache::KvEvent& e : b.events) {
      if (e.type == kvcache::KvEvent::Type::kBlockStored) {
        from_events.insert(e.block_hashes.begin(), e.block_hashes.end());
      } else if (e.type == kvcache::KvEvent::Type::kBlockRemoved) {
        for (const kvcache::BlockHash& h : e.block_hashes) from_events.erase(h);
      } else {
        from_events.clear();
      }
    }
  });

  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const EngineRequest& r : requests) {
    auto s = (*engine)->Submit(r);
    ASSERT_TRUE(s.ok()) << s.status();
    streams.push_back(*s);
  }
  // Cancel every fourth request from another thread once it has produced a token.
  std::vector<Outcome> outcomes(requests.size());
  std::vector<std::thread> readers;
  for (size_t i = 0; i < streams.size(); ++i) {
    readers.emplace_back([&, i] {
      const bool cancel = v.cancel_some && i % 4 == 2;
      TokenEvent e;
      bool cancelled = false;
      while (streams[i]->Next(&e)) {
        outcomes[i].ids.insert(outcomes[i].ids.end(), e.token_ids.begin(), e.token_ids.end());
        outcomes[i].text += e.text;
        if (e.finished) outcomes[i].last = e;
        if (cancel && !cancelled && !e.finished) {
          cancelled = true;
          const absl::Status c = (*engine)->Cancel(requests[i].id);
          // NotFound only if it finished in the meantime.
          EXPECT_TRUE(c.ok() || c.code() == absl::StatusCode::kNotFound) << c;
        }
      }
    });
  }
  for (auto& t : readers) t.join();

  int cancelled = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    SCOPED_TRACE(requests[i].id);
    const Outcome& got = outcomes[i];
    ASSERT_TRUE(got.last.finished);
    if (got.last.status.code() == absl::StatusCode::kCancelled) {
      ++cancelled;
      // What it produced before the cancel is a prefix of what it would produce.
      ASSERT_LE(got.ids.size(), expected[i].ids.size());
      EXPECT_TRUE(std::equal(got.ids.begin(), got.ids.end(), expected[i].ids.begin()));
      continue;
    }
    ASSERT_TRUE(got.last.status.ok()) << got.last.status;
    EXPECT_EQ(got.ids, expected[i].ids);
    EXPECT_EQ(got.text, expected[i].text);
    EXPECT_EQ(std::string(FinishReasonName(got.last.finish_reason)), expected[i].finish_reason);
    EXPECT_EQ(got.last.usage.prompt_tokens, static_cast<int64_t>(requests[i].prompt_ids.size()));
    EXPECT_EQ(got.last.usage.completion_tokens, static_cast<int64_t>(got.ids.size()));
  }
  if (v.cancel_some) {
    EXPECT_GT(cancelled, 0);
  }
  ExpectNoLeaks(engine->get());
  const EngineStats s = (*engine)->Stats();
  if (v.tiny_pool) {
    EXPECT_GT(s.preemptions, 0) << "the small pool did not force a preemption";
  }
  if (v.prefix_cache) {
    EXPECT_GT(s.prefix_hit_tokens, 0);
  } else {
    EXPECT_EQ(s.prefix_hit_tokens, 0);
    EXPECT_EQ(s.pages_cached, 0);
  }
  // The events add up to the snapshot, and to what the pool holds.
  const kvcache::KvSnapshot snap = (*engine)->kv_events().Snapshot();
  EXPECT_EQ(std::set<kvcache::BlockHash>(snap.block_hashes.begin(), snap.block_hashes.end()),
            from_events);
  EXPECT_EQ(static_cast<int64_t>(from_events.size()), s.pages_cached);
}

class EngineEquivalence : public ::testing::TestWithParam<std::string> {
 protected:
  const LoadedModel* Model() {
    if (GetParam() == "stories260K" && !std::filesystem::exists(kStories)) {
      return nullptr;
    }
    return Load(GetParam() == "stories260K" ? kStories : kTiny);
  }
};

#define BATON_MODEL_OR_SKIP(m)                                                         \
  const LoadedModel* m = Model();                                                      \
  if (m == nullptr) {                                                                  \
    GTEST_SKIP() << "stories260K is not in " << BATON_TESTDATA_DIR                     \
                 << " (../shared/testdata); skipping the real-model equivalence test"; \
  }

TEST_P(EngineEquivalence, ConcurrentRequestsMatchEachAlone) {
  BATON_MODEL_OR_SKIP(m);
  RunEquivalence(*m, {"prefix cache on"});
}

TEST_P(EngineEquivalence, WithoutThePrefixCache) {
  BATON_MODEL_OR_SKIP(m);
  RunEquivalence(*m, {"prefix cache off", false});
}

TEST_P(EngineEquivalence, UnderForcedPreemption) {
  BATON_MODEL_OR_SKIP(m);
  RunEquivalence(*m, {"tiny pool", true, true});
}

TEST_P(EngineEquivalence, WithCancellations) {
  BATON_MODEL_OR_SKIP(m);
  RunEquivalence(*m, {"cancellations", true, true, true});
}

INSTANTIATE_TEST_SUITE_P(Models, EngineEquivalence, ::testing::Values("baton-tiny", "stories260K"));

// A second round of the same prompts is served from the prefix cache: the usage says
// so, and the tokens do not change.
TEST(EngineTest, RepeatedPromptsHitThePrefixCache) {
  const LoadedModel* m = Load(kTiny);
  ASSERT_NE(m, nullptr);
  auto engine = Engine::Create(m, SmallOptions());
  ASSERT_TRUE(engine.ok());
  const std::vector<EngineRequest> requests = MakeRequests(*m, 4, 3);
  std::vector<Outcome> first;
  for (const EngineRequest& r : requests) first.push_back(Drain((*engine)->Submit(r)->get()));
  for (size_t i = 0; i < requests.size(); ++i) {
    Outcome again = Drain((*engine)->Submit(requests[i])->get());
    EXPECT_EQ(again.ids, first[i].ids);
    const int64_t len = static_cast<int64_t>(requests[i].prompt_ids.size());
    EXPECT_EQ(again.last.usage.cached_tokens, (len - 1) / 16 * 16) << i;
  }
  const EngineStats s = (*engine)->Stats();
  EXPECT_GT(s.prefix_hit_rate, 0.3);
  EXPECT_LT(s.prefix_hit_rate, 1.0);
  ExpectNoLeaks(engine->get());
  // Reset empties it: the next identical request computes everything.
  ASSERT_TRUE((*engine)->ResetPrefixCache().ok());
  EXPECT_EQ((*engine)->Stats().pages_cached, 0);
  Outcome after = Drain((*engine)->Submit(requests[0])->get());
  EXPECT_EQ(after.last.usage.cached_tokens, 0);
  EXPECT_TRUE((*engine)->kv_events().Snapshot().block_hashes.size() > 0);
}

// A sequence resumed from the tokens it generated (a stream migrated from a worker that
// died, EngineRequest::output_ids) goes on exactly as the uninterrupted sequence did: the
// oracle is that sequence, for greedy and for seeded sampling with penalties, with every
// split point.
TEST(EngineTest, AResumedSequenceGoesOnAsTheUninterruptedOne) {
  const LoadedModel* m = Load(kTiny);
  ASSERT_NE(m, nullptr);
  auto engine = Engine::Create(m, SmallOptions());
  ASSERT_TRUE(engine.ok());
  for (EngineRequest r : MakeRequests(*m, 6, 11)) {
    r.params.max_tokens = 24;
    r.params.ignore_eos = true;
    r.params.repetition_penalty = 1.2;
    r.params.frequency_penalty = 0.3;
    const Outcome whole = Drain((*engine)->Submit(r)->get());
    ASSERT_EQ(whole.ids.size(), 24u) << r.id;
    for (size_t k : {size_t{1}, size_t{7}, size_t{23}}) {
      EngineRequest resumed = r;
      resumed.id = StrCat(r.id, "-from-", k);
      resumed.output_ids.assign(whole.ids.begin(), whole.ids.begin() + k);
      resumed.detokenize = false;
      const Outcome rest = Drain((*engine)->Submit(resumed)->get());
      EXPECT_EQ(rest.ids, std::vector<int32_t>(whole.ids.begin() + k, whole.ids.end()))
          << r.id << " from " << k;
      EXPECT_EQ(rest.last.usage.completion_tokens, 24) << "the resumed tokens count as output";
      EXPECT_EQ(rest.last.usage.prompt_tokens, static_cast<int64_t>(r.prompt_ids.size()));
      EXPECT_EQ(rest.last.finish_reason, FinishReason::kLength);
    }
  }
  ExpectNoLeaks(engine->get());
}

TEST(EngineTest, ResumedOutputIdsAreChecked) {
  const LoadedModel* m = Load(kTiny);
  ASSERT_NE(m, nullptr);
  auto engine = Engine::Create(m, SmallOptions());
  ASSERT_TRUE(engine.ok());
  EngineRequest r;
  r.prompt_ids = {5, 6, 7};
  r.params.max_tokens = 3;
  r.output_ids = {8, 9, 10};
  EXPECT_THAT((*engine)->Submit(r).status().message(), HasSubstr("leaves none to generate"));
  r.output_ids = {8, -1};
  EXPECT_THAT((*engine)->Submit(r).status().message(), HasSubstr("output_ids[1] is -1"));
  r.output_ids = {8};
  r.kv_transfer_id = "t";
  EXPECT_THAT((*engine)->Submit(r).status().message(), HasSubstr("KV transfer"));
}

// A pool in memory the caller provides (a decode worker's, allocated by UCX) serves the
// same outputs as the engine's own mapping, and the engine leaves it mapped.
TEST(EngineTest, TheKvPoolCanLiveInTheCallersMemory) {
  const LoadedModel* m = Load(kTiny);
  ASSERT_NE(m, nullptr);
  const std::vector<EngineRequest> requests = MakeRequests(*m, 3, 5);
  void* memory = nullptr;
  size_t bytes = 0;
  EngineOptions o = SmallOptions();
  o.kv_pool_memory = [&](size_t n) -> absl::StatusOr<void*> {
    memory = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    bytes = n;
    return memory;
  };
  {
    auto engine = Engine::Create(m, o);
    ASSERT_TRUE(engine.ok()) << engine.status();
    EXPECT_EQ(static_cast<void*>((*engine)->kv_pool_data()), memory);
    EXPECT_EQ(static_cast<size_t>((*engine)->kv_pool_bytes()), bytes);
    for (const EngineRequest& r : requests) {
      const Expected want = Alone(*m, r);
      EXPECT_EQ(Drain((*engine)->Submit(r)->get()).ids, want.ids);
    }
  }
  // Still ours after the engine is gone: touching it would fault if the engine unmapped it.
  static_cast<volatile char*>(memory)[bytes - 1] = 1;
  EXPECT_EQ(::munmap(memory, bytes), 0);
  // A callback that declines (null) leaves the mapping to the engine.
  o.kv_pool_memory = [](size_t) -> absl::StatusOr<void*> { return nullptr; };
  auto engine = Engine::Create(m, o);
  ASSERT_TRUE(engine.ok());
  EXPECT_NE((*engine)->kv_pool_data(), nullptr);
  // A callback that fails fails the engine's creation with its error.
  o.kv_pool_memory = [](size_t) -> absl::StatusOr<void*> {
    return absl::ResourceExhaustedError("no shared memory");
  };
  EXPECT_EQ(Engine::Create(m, o).status().message(), "no shared memory");
}

TEST(EngineTest, BadRequestsGetClearErrors) {
  const LoadedModel* m = Load(kTiny);
  ASSERT_NE(m, nullptr);
  EngineOptions o = SmallOptions();
  o.kv_cache_bytes = 8 * PageLayoutFor(m->model->config(), 16, o.kv_cache_dtype).page_bytes();
  auto engine = Engine::Create(m, o);
  ASSERT_TRUE(engine.ok());
  EngineRequest r;
  r.prompt_ids = {5, 6, 7};
  r.params.max_tokens = 8;

  EngineRequest empty = r;
  empty.prompt_ids.clear();
  EXPECT_THAT(std::string((*engine)->Submit(empty).status().message()), HasSubstr("empty"));

  EngineRequest bad_id = r;
  bad_id.prompt_ids[1] = 1 << 20;
  absl::Status s = (*engine)->Submit(bad_id).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("prompt token 1"));

  EngineRequest too_long = r;
  too_long.prompt_ids.assign(m->model->config().max_position_embeddings, 5);
  s = (*engine)->Submit(too_long).status();
  EXPECT_THAT(std::string(s.message()), HasSubstr("maximum context length"));

  EngineRequest too_big = r;  // 8 pages of 16 tokens = 128 tokens
  too_big.params.max_tokens = 200;
  s = (*engine)->Submit(too_big).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("KV cache has only 8 pages"));

  EngineRequest bad_param = r;
  bad_param.params.top_p = 2;
  EXPECT_THAT(std::string((*engine)->Submit(bad_param).status().message()), HasSubstr("top_p"));

  EXPECT_EQ((*engine)->Cancel("nope").code(), absl::StatusCode::kNotFound);

  // A duplicate id while the first is live.
  EngineRequest a = r;
  a.id = "same";
  a.params.max_tokens = 100;
  a.params.ignore_eos = true;
  auto first = (*engine)->Submit(a);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ((*engine)->Submit(a).status().code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE((*engine)->Cancel("same").ok());
  Outcome o1 = Drain(first->get());
  EXPECT_EQ(o1.last.status.code(), absl::StatusCode::kCancelled);
  ExpectNoLeaks(engine->get());
}

TEST(EngineTest, AFullQueueIsAnOverloadError) {
  const LoadedModel* m = Load(kTiny);
  ASSERT_NE(m, nullptr);
  EngineOptions o = SmallOptions();
  o.max_running = 1;
  o.max_waiting = 2;
  auto engine = Engine::Create(m, o);
  ASSERT_TRUE(engine.ok());
  EngineRequest r;
  r.prompt_ids = {5, 6, 7};
  r.params.max_tokens = 400;
  r.params.ignore_eos = true;
  auto running = (*engine)->Submit(r);
  ASSERT_TRUE(running.ok());
  TokenEvent e;
  ASSERT_TRUE((*running)->Next(&e));  // it runs
  auto w1 = (*engine)->Submit(r), w2 = (*engine)->Submit(r);
  ASSERT_TRUE(w1.ok() && w2.ok());
  absl::Status s = (*engine)->Submit(r).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()), HasSubstr("max_waiting"));
  for (const auto& st : {*running, *w1, *w2}) ASSERT_TRUE((*engine)->Cancel(st->id()).ok());
  for (const auto& st : {*running, *w1, *w2}) {
    EXPECT_EQ(Drain(st.get()).last.status.code(), absl::StatusCode::kCancelled);
  }
  ExpectNoLeaks(engine->get());
  EXPECT_EQ((*engine)->Stats().requests_cancelled, 3);
}

TEST(EngineTest, OptionsAreValidated) {
  const LoadedModel* m = Load(kTiny);
  ASSERT_NE(m, nullptr);
  EngineOptions o = SmallOptions();
  o.kv_cache_bytes = 100;
  EXPECT_THAT(std::string(Engine::Create(m, o).status().message()),
              HasSubstr("less than one page"));
  o = SmallOptions();
  o.max_batched_tokens = 4;
  EXPECT_THAT(std::string(Engine::Create(m, o).status().message()),
              HasSubstr("max_batched_tokens"));
  o = SmallOptions();
  o.kv_cache_bytes = 0;
  o.kv_cache_fraction = 1.5;
  EXPECT_THAT(std::string(Engine::Create(m, o).status().message()), HasSubstr("kv_cache_fraction"));
}

// Destroying the engine ends open streams cleanly.
TEST(EngineTest, ShutdownEndsOpenStreams) {
  const LoadedModel* m = Load(kTiny);
  ASSERT_NE(m, nullptr);
  auto engine = Engine::Create(m, SmallOptions());
  ASSERT_TRUE(engine.ok());
  EngineRequest r;
  r.prompt_ids = {5, 6, 7};
  r.params.max_tokens = 400;
  r.params.ignore_eos = true;
  auto s = (*engine)->Submit(r);
  ASSERT_TRUE(s.ok());
  engine->reset();
  Outcome o = Drain(s->get());
  EXPECT_TRUE(o.last.finished);
  EXPECT_TRUE(o.last.status.ok() || o.last.status.code() == absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace baton::engine
