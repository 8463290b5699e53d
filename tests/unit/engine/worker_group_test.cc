// Worker groups against one rank. Every rank is a thread with its own model shard, pages,
// compute thread and gloo communicators, talking over loopback TCP as processes do:
//   - the forward's logits of TP=2, PP=2, TP=2 x PP=2 and TP=3 agree with TP=1 within a
//     stated tolerance, and greedy tokens are equal;
//   - within one placement a sequence's logits are bit-identical alone and in a batch;
//   - the engine on a TP=2 group (continuous batching, prefix cache, preemption) gives
//     the tokens of one rank;
//   - a rank that leaves ends the leader's requests with Unavailable, quickly.
#include "engine/parallel/worker_group.h"

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>
#include <thread>

#include "common/strings.h"
#include "engine/engine.h"
#include "engine/model_runner.h"
#include "gtest/gtest.h"
#include "kernels/cpu/matmul.h"
#include "modelgen/synthetic_model.h"

namespace baton::engine {
namespace {

const std::string kTiny = std::string(BATON_SOURCE_DIR) + "/models/baton-tiny";
const std::string kStories =
    std::string(BATON_TESTDATA_DIR) + "/models/stories260K/stories260K.gguf";

std::string TempDir(const std::string& what) {
  static std::atomic<int> n{0};
  auto dir = std::filesystem::temp_directory_path() /
             StrCat("baton_group_", what, "_", getpid(), "_", n++);
  std::filesystem::create_directories(dir);
  return dir.string();
}

// A 3-KV-head shape (9 query heads, as SmolLM2-135M), small enough for every build.
const std::string& ThreeKvHeadModel() {
  static const std::string dir = [] {
    std::string out = TempDir("synth3kv");
    modelgen::SyntheticModelSpec spec;
    spec.config = *modelgen::SyntheticShape("tiny");
    spec.config.num_heads = 9;
    spec.config.num_kv_heads = 3;
    spec.config.head_dim = 16;
    spec.config.hidden_size = 144;
    spec.config.intermediate_size = 192;
    spec.config.num_layers = 3;
    spec.seed = 7;
    spec.write_gguf = false;
    absl::Status s = modelgen::WriteSyntheticModel(spec, out);
    EXPECT_TRUE(s.ok()) << s;
    return out;
  }();
  return dir;
}

bool HaveStories() { return std::filesystem::exists(kStories); }

// One rank's state.
struct Rank {
  std::unique_ptr<LoadedModel> model;
  std::unique_ptr<ThreadPool> threads;
  std::shared_ptr<GroupComms> comms;
  std::thread follower;
  absl::Status follower_result;
};

// A group of tp x pp ranks: Start() connects them all and starts the followers; the
// leader's comms go to a Backend or an Engine.
class Group {
 public:
  Group(const std::string& path, int tp, int pp,
        std::chrono::milliseconds timeout = std::chrono::seconds(20), bool start_followers = true)
      : store_(TempDir("store")) {
    options_.tp_size = tp;
    options_.pp_size = pp;
    options_.store = &store_;
    options_.timeout = timeout;
    options_.keepalive = std::chrono::milliseconds(200);
    ranks_.resize(tp * pp);
    std::vector<std::thread> connect;
    for (int r = 0; r < tp * pp; ++r) {
      connect.emplace_back([this, r, path] {
        GroupOptions o = options_;
        o.rank = r;
        Rank& rank = ranks_[r];
        auto m = LoadModel(path, {}, PlacementOf(o));
        if (!m.ok()) {
          rank.follower_result = m.status();
          return;
        }
        rank.model = std::make_unique<LoadedModel>(std::move(*m));
        rank.threads = std::make_unique<ThreadPool>(1);
        auto comms = ConnectGroup(o);
        if (!comms.ok()) {
          rank.follower_result = comms.status();
          return;
        }
        rank.comms = std::make_shared<GroupComms>(std::move(*comms));
      });
    }
    for (auto& t : connect) t.join();
    for (int r = 0; r < tp * pp; ++r) {
      EXPECT_TRUE(ranks_[r].comms != nullptr) << "rank " << r << ": " << ranks_[r].follower_result;
    }
    for (int r = 1; r < tp * pp && start_followers; ++r) {
      ranks_[r].follower = std::thread([this, r] {
        GroupOptions o = options_;
        o.rank = r;
        if (ranks_[r].comms == nullptr) return;
        ranks_[r].follower_result = RunGroupFollower(
            *ranks_[r].model->model, o, ranks_[r].comms.get(), ranks_[r].threads.get());
      });
    }
  }
  ~Group() {
    Join();
    std::filesystem::remove_all(store_.dir());
  }

  // Waits for the followers (after the leader's backend is gone).
  void Join() {
    for (auto& r : ranks_) {
      if (r.follower.joinable()) r.follower.join();
    }
  }

  const LoadedModel& leader_model() const { return *ranks_[0].model; }
  EngineOptions LeaderOptions(EngineOptions base) {
    GroupOptions o = options_;
    base.shard = *model::PlanShard(ranks_[0].model->model->config(), PlacementOf(o));
    base.backend = MakeGroupBackendFactory(ranks_[0].model->model.get(), o, ranks_[0].comms);
    base.threads = 1;
    return base;
  }
  Rank& rank(int r) { return ranks_[r]; }
  const GroupOptions& options() const { return options_; }

 private:
  parallel::FileStore store_;
  GroupOptions options_;
  std::vector<Rank> ranks_;
};

struct Batch {
  std::vector<std::vector<int32_t>> tokens, blocks;
  std::vector<int64_t> starts;
  std::vector<SequenceInput> inputs() const {
    std::vector<SequenceInput> out;
    for (size_t i = 0; i < tokens.size(); ++i) {
      out.push_back({tokens[i], starts[i], blocks[i], LogitsWanted::kAll});
    }
    return out;
  }
};

// Three prompts of different lengths, prefilled in one step: the prompt rows' logits.
Batch PrefillBatch(int64_t vocab, int64_t block_size) {
  Batch b;
  std::mt19937 rng(11);
  int32_t next_page = 0;
  for (int len : {7, 23, 40}) {
    std::vector<int32_t> t;
    for (int i = 0; i < len; ++i) t.push_back(3 + static_cast<int32_t>(rng() % (vocab - 3)));
    b.tokens.push_back(t);
    b.starts.push_back(0);
    std::vector<int32_t> pages;
    for (int64_t p = 0; p < (len + block_size - 1) / block_size; ++p) pages.push_back(next_page++);
    b.blocks.push_back(pages);
  }
  return b;
}

// The single-rank logits of a batch.
ForwardOutput OneRank(const std::string& path, const Batch& b, const std::string& kv_dtype) {
  auto m = LoadModel(path);
  EXPECT_TRUE(m.ok()) << m.status();
  auto pool = kvcache::KvPool::Create(PageLayoutFor(m->model->config(), 16, kv_dtype), 64);
  ThreadPool threads(1);
  ModelRunner runner(*m->model, pool->get(), &threads);
  ForwardOutput out;
  absl::Status s = runner.Forward(b.inputs(), &out);
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

// Runs the batch on a group's leader backend (the followers run alongside).
ForwardOutput OnGroup(Group& g, const Batch& b, const std::string& kv_dtype,
                      std::unique_ptr<kvcache::KvPool>* pool_out = nullptr) {
  const model::ModelConfig& config = g.leader_model().model->config();
  model::Shard shard = *model::PlanShard(config, PlacementOf(g.options()));
  auto pool = kvcache::KvPool::Create(PageLayoutFor(shard, config, 16, kv_dtype), 64);
  EXPECT_TRUE(pool.ok());
  ForwardOutput out;
  {
    auto backend =
        GroupBackend::Create(*g.leader_model().model, g.options(), std::move(*g.rank(0).comms),
                             pool->get(), g.rank(0).threads.get());
    EXPECT_TRUE(backend.ok()) << backend.status();
    if (!backend.ok()) return out;
    absl::Status s = (*backend)->Forward(b.inputs(), &out);
    EXPECT_TRUE(s.ok()) << s;
    // Batch invariance within the placement: the middle sequence alone, again, into fresh
    // pages, gives bit-identical rows.
    Batch alone;
    alone.tokens = {b.tokens[1]};
    alone.starts = {0};
    alone.blocks = {{40, 41}};
    ForwardOutput single;
    s = (*backend)->Forward(alone.inputs(), &single);
    EXPECT_TRUE(s.ok()) << s;
    const int64_t vocab = out.vocab_size;
    const int64_t rows = static_cast<int64_t>(b.tokens[1].size());
    int64_t differ = 0;
    for (int64_t r = 0; r < rows * vocab; ++r) {
      differ += single.logits[r] != out.logits[out.first_row[1] * vocab + r];
    }
    EXPECT_EQ(differ, 0) << "logits of a sequence alone and in a batch differ";
  }
  g.Join();
  for (int r = 1; r < g.options().tp_size * g.options().pp_size; ++r) {
    EXPECT_TRUE(g.rank(r).follower_result.ok()) << r << ": " << g.rank(r).follower_result;
  }
  if (pool_out != nullptr) *pool_out = std::move(*pool);
  return out;
}

// Largest |a - b| over the rows, relative to the largest |a|; and whether every row's
// argmax agrees.
void ExpectClose(const ForwardOutput& want, const ForwardOutput& got, double tolerance) {
  ASSERT_EQ(want.logits.size(), got.logits.size());
  double max_diff = 0, max_abs = 0;
  int argmax_mismatch = 0;
  const int64_t vocab = want.vocab_size;
  for (size_t r = 0; r < want.logits.size() / vocab; ++r) {
    int64_t a = 0, b = 0;
    for (int64_t j = 0; j < vocab; ++j) {
      const float x = want.logits[r * vocab + j], y = got.logits[r * vocab + j];
      max_diff = std::max(max_diff, std::fabs(static_cast<double>(x) - y));
      max_abs = std::max(max_abs, std::fabs(static_cast<double>(x)));
      if (x > want.logits[r * vocab + a]) a = j;
      if (y > got.logits[r * vocab + b]) b = j;
    }
    argmax_mismatch += a != b;
  }
  std::printf("  max |logit diff| %.3g of max |logit| %.3g (relative %.3g), %zu rows\n", max_diff,
              max_abs, max_diff / max_abs, want.logits.size() / vocab);
  EXPECT_LE(max_diff / max_abs, tolerance)
      << "max |diff| " << max_diff << " of max |logit| " << max_abs;
  EXPECT_EQ(argmax_mismatch, 0);
}

struct Placement {
  std::string name;
  int tp, pp;
};

// One rank against a group, on f32 and on bf16 pages. The all-reduce sums partial dot
// products in another order than one rank does: about 1e-6 relative per sum, grown
// through the layers (bound 1e-4). Where the forward rounds intermediate values to bf16,
// such a difference now and then moves a value across a rounding boundary, a change of
// 2^-8 of it that the later layers carry on: on bf16 KV pages, and on the avx512bf16
// kernels with bf16 weights (they round activations for vdpbf16ps). Measured: bf16 pages
// 4e-6 to 1.2e-3 on the avx512 kernels; baton-tiny (bf16 weights) on avx512bf16 2.3e-3 on
// f32 pages and 2.4e-3 on bf16 ones; hence 1e-2 there. PP alone changes nothing.
void CheckForward(const std::string& path, const Placement& p) {
  const auto loaded = LoadModel(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const model::ModelConfig config = loaded->model->config();
  const bool bf16_activations =
      loaded->model->weights().layers[0].q.weight.dtype == cpu::DType::kBF16 &&
      std::string(cpu::ActiveIsa()) == "avx512bf16";
  const Batch b = PrefillBatch(std::min<int64_t>(config.vocab_size, 256), 16);
  for (const std::string kv_dtype : {"f32", "bf16"}) {
    SCOPED_TRACE(StrCat(p.name, " on ", path, ", ", kv_dtype, " pages, ", cpu::ActiveIsa()));
    const ForwardOutput want = OneRank(path, b, kv_dtype);
    Group g(path, p.tp, p.pp);
    const ForwardOutput got = OnGroup(g, b, kv_dtype);
    const double tolerance = kv_dtype == "bf16" || bf16_activations ? 1e-2 : 1e-4;
    ExpectClose(want, got, p.tp == 1 ? 0.0 : tolerance);
  }
}

TEST(WorkerGroup, ForwardMatchesOneRankOnBatonTiny) {
  for (const Placement& p :
       {Placement{"tp2", 2, 1}, Placement{"pp2", 1, 2}, Placement{"tp2pp2", 2, 2}}) {
    CheckForward(kTiny, p);
  }
}

TEST(WorkerGroup, ForwardMatchesOneRankOnStories260K) {
  if (!HaveStories()) GTEST_SKIP() << "stories260K not in " << kStories;
  // 5 layers: PP=2 runs 3 + 2.
  for (const Placement& p :
       {Placement{"tp2", 2, 1}, Placement{"pp2", 1, 2}, Placement{"tp2pp2", 2, 2}}) {
    CheckForward(kStories, p);
  }
}

TEST(WorkerGroup, ThreeKvHeadsSplitThreeWays) {
  CheckForward(ThreeKvHeadModel(), Placement{"tp3", 3, 1});
}

TEST(WorkerGroup, RefusesASplitThatCutsKvHeads) {
  const model::ModelConfig config = LoadModel(ThreeKvHeadModel())->model->config();
  auto shard = model::PlanShard(config, {0, 2, 0, 1});
  ASSERT_FALSE(shard.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(shard.status()));
  EXPECT_NE(shard.status().message().find("--tensor-parallel-size 2"), std::string::npos)
      << shard.status();
  EXPECT_NE(shard.status().message().find("9 attention heads"), std::string::npos)
      << shard.status();
  // 12 heads over 4 KV heads: 6 ranks divide the heads, but neither divide the KV heads
  // nor are a multiple of them.
  model::ModelConfig c = config;
  c.num_heads = 12;
  c.num_kv_heads = 4;
  c.intermediate_size = 192;
  auto six = model::PlanShard(c, {0, 6, 0, 1});
  ASSERT_FALSE(six.ok());
  EXPECT_NE(six.status().message().find("4 KV heads"), std::string::npos) << six.status();
  EXPECT_TRUE(model::PlanShard(c, {0, 4, 0, 1}).ok());
  EXPECT_TRUE(model::PlanShard(c, {0, 12, 0, 1}).ok());       // each KV head on 3 ranks
  EXPECT_FALSE(model::PlanShard(config, {0, 1, 0, 4}).ok());  // 4 stages of 3 layers
}

// Each rank's page layout names its slice: the KV heads and layers its pages hold, and
// together the ranks' slices cover the model's once per replica.
TEST(WorkerGroup, EachRanksPageLayoutNamesItsSlice) {
  model::ModelConfig c = LoadModel(ThreeKvHeadModel())->model->config();
  c.num_heads = 12;
  c.num_kv_heads = 4;
  c.intermediate_size = 192;
  for (const auto& [tp, pp] :
       {std::pair{2, 1}, std::pair{4, 1}, std::pair{12, 1}, std::pair{2, 2}, std::pair{1, 3}}) {
    // heads_seen[layer][kv head]: ranks holding that head of that layer.
    std::vector<std::vector<int>> heads_seen(c.num_layers, std::vector<int>(c.num_kv_heads, 0));
    for (int pr = 0; pr < pp; ++pr) {
      for (int tr = 0; tr < tp; ++tr) {
        auto shard = model::PlanShard(c, {tr, tp, pr, pp});
        ASSERT_TRUE(shard.ok()) << shard.status();
        const kvcache::PageLayout l = PageLayoutFor(*shard, c, 16, "bf16");
        EXPECT_EQ(l.tp_rank, tr);
        EXPECT_EQ(l.tp_size, tp);
        EXPECT_EQ(l.pp_rank, pr);
        EXPECT_EQ(l.pp_size, pp);
        EXPECT_EQ(l.dtype, "bf16");
        EXPECT_EQ(l.page_bytes(), l.num_layers * 2 * 16 * l.num_kv_heads * c.head_dim * 2);
        for (int64_t layer = l.first_layer; layer < l.first_layer + l.num_layers; ++layer) {
          for (int64_t h = l.first_kv_head; h < l.first_kv_head + l.num_kv_heads; ++h) {
            ASSERT_LT(layer, c.num_layers);
            ASSERT_LT(h, c.num_kv_heads);
            ++heads_seen[layer][h];
          }
        }
      }
    }
    const int replicas = tp > c.num_kv_heads ? tp / static_cast<int>(c.num_kv_heads) : 1;
    for (const auto& layer : heads_seen) {
      for (int n : layer) EXPECT_EQ(n, replicas) << "tp " << tp << " pp " << pp;
    }
  }
}

// Greedy and seeded runs of many concurrent requests, with a small pool so that the
// scheduler preempts, and shared prefixes for the prefix cache. `one_at_a_time`: each
// request submitted once the one before has finished, so none shares a step.
std::map<std::string, std::vector<int32_t>> RunEngine(const LoadedModel& model,
                                                      EngineOptions options, int64_t* preemptions,
                                                      int64_t* hits, bool one_at_a_time = false) {
  auto engine = Engine::Create(&model, options);
  EXPECT_TRUE(engine.ok()) << engine.status();
  std::map<std::string, std::vector<int32_t>> out;
  if (!engine.ok()) return out;
  std::mt19937 rng(5);
  const int32_t vocab = 200;
  std::vector<int32_t> prefix;
  for (int i = 0; i < 40; ++i) prefix.push_back(3 + static_cast<int32_t>(rng() % vocab));
  std::vector<std::pair<std::string, std::shared_ptr<RequestStream>>> streams;
  for (int i = 0; i < 12; ++i) {
    EngineRequest r;
    r.id = StrCat("r", i);
    r.prompt_ids = prefix;
    for (int k = 0; k < 1 + i * 3; ++k)
      r.prompt_ids.push_back(3 + static_cast<int32_t>(rng() % vocab));
    r.params.max_tokens = 24;
    r.params.ignore_eos = true;
    if (i % 3 == 1) {
      r.params.temperature = 0.8;
      r.params.seed = 100 + i;
    } else {
      r.params.temperature = 0;
    }
    auto s = (*engine)->Submit(std::move(r));
    EXPECT_TRUE(s.ok()) << s.status();
    if (s.ok()) streams.emplace_back(StrCat("r", i), *s);
    if (one_at_a_time) (*engine)->WaitIdle();
  }
  for (auto& [id, stream] : streams) {
    TokenEvent e;
    while (stream->Next(&e)) {
      out[id].insert(out[id].end(), e.token_ids.begin(), e.token_ids.end());
      if (e.finished) {
        EXPECT_TRUE(e.status.ok()) << id << ": " << e.status;
      }
    }
  }
  const EngineStats stats = (*engine)->Stats();
  *preemptions = stats.preemptions;
  *hits = stats.prefix_hit_tokens;
  return out;
}

// The engine on a TP=2 group (continuous batching, prefix cache, preemption) against one
// rank, on f32 pages: the all-reduce's other summation order moves the logits by about
// 1e-6 relative, which none of these tokens notices. (On bf16 pages it can move a K/V value
// across a rounding boundary, and a sampled token can then differ: ForwardMatchesOneRank
// measures it. The next test holds bf16 pages to their own oracle.)
TEST(WorkerGroup, EngineOnTensorParallelGroupGivesOneRanksTokens) {
  EngineOptions base;
  base.kv_cache_dtype = "f32";
  // 14 pages of 16 tokens: fewer than 12 requests need at once, so some are preempted.
  auto loaded = LoadModel(kTiny);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const LoadedModel& one = *loaded;
  const kvcache::PageLayout full = PageLayoutFor(one.model->config(), 16, base.kv_cache_dtype);
  base.kv_cache_bytes = 14 * full.page_bytes();
  base.max_batched_tokens = 64;
  base.max_running = 8;
  base.threads = 1;
  int64_t pre1 = 0, hits1 = 0, pre2 = 0, hits2 = 0;
  const auto want = RunEngine(one, base, &pre1, &hits1);
  Group g(kTiny, 2, 1);
  EngineOptions opts = g.LeaderOptions(base);
  // Each rank's page holds half the heads: the same page count needs half the bytes.
  opts.kv_cache_bytes = base.kv_cache_bytes / 2;
  const auto got = RunEngine(g.leader_model(), opts, &pre2, &hits2);
  g.Join();
  EXPECT_EQ(want, got);
  // The counts depend on when each Submit lands between steps (a group's steps are
  // slower), so only their presence is checked; the tokens above are the oracle.
  EXPECT_GT(pre1, 0) << "the pool was meant to be small enough to preempt";
  EXPECT_GT(pre2, 0) << "the group's engine was meant to preempt too";
  EXPECT_GT(hits1, 0);
  EXPECT_GT(hits2, 0);
}

// The same on bf16 pages (the default), against the same placement serving each request
// alone with room to spare: within one placement a sequence's tokens do not depend on the
// batch, on preemption (its K/V recomputed) or on the prefix cache, bit for bit.
TEST(WorkerGroup, EngineOnTensorParallelGroupWithBf16PagesGivesEachRequestAlonesTokens) {
  EngineOptions base;
  ASSERT_EQ(base.kv_cache_dtype, "bf16");
  auto loaded = LoadModel(kTiny);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const kvcache::PageLayout full = PageLayoutFor(loaded->model->config(), 16, base.kv_cache_dtype);
  base.max_batched_tokens = 64;
  base.max_running = 8;
  base.threads = 1;
  int64_t pre1 = 0, hits1 = 0, pre2 = 0, hits2 = 0;
  std::map<std::string, std::vector<int32_t>> want;
  {
    Group g(kTiny, 2, 1);
    EngineOptions opts = g.LeaderOptions(base);
    opts.kv_cache_bytes = 64 * full.page_bytes() / 2;  // each rank holds half the heads
    want = RunEngine(g.leader_model(), opts, &pre1, &hits1, /*one_at_a_time=*/true);
    g.Join();
  }
  Group g(kTiny, 2, 1);
  EngineOptions opts = g.LeaderOptions(base);
  opts.kv_cache_bytes = 14 * full.page_bytes() / 2;  // 14 pages: some requests are preempted
  const auto got = RunEngine(g.leader_model(), opts, &pre2, &hits2);
  g.Join();
  EXPECT_EQ(want.size(), 12u);
  EXPECT_EQ(want, got);
  EXPECT_EQ(pre1, 0) << "alone, with room to spare";
  EXPECT_GT(pre2, 0) << "the pool was meant to be small enough to preempt";
  EXPECT_GT(hits2, 0);
}

// One short request to `engine`: its final event.
TokenEvent RunShortRequest(Engine& engine) {
  EngineRequest r;
  r.prompt_ids = {5, 6, 7, 8};
  r.params.max_tokens = 4;
  r.params.temperature = 0;
  r.params.ignore_eos = true;
  TokenEvent e;
  auto s = engine.Submit(r);
  if (!s.ok()) {
    e.status = s.status();
    return e;
  }
  while ((*s)->Next(&e)) {
  }
  return e;
}

// A follower's pool takes the leader's KV element type (and page count) from the group's
// setup, whatever the follower was told: the pages of a group are one kind.
TEST(WorkerGroup, TheFollowersTakeTheLeadersKvDtype) {
  for (const std::string dtype : {"f32", "bf16"}) {
    SCOPED_TRACE(dtype);
    Group g(kTiny, 2, 1, std::chrono::seconds(20), /*start_followers=*/false);
    kvcache::PageLayout follower_layout;
    int64_t follower_pages = 0;
    g.rank(1).follower = std::thread([&] {
      GroupOptions o = g.options();
      o.rank = 1;
      RankKvSetup kv;
      kv.make = [&](kvcache::KvPool* pool) -> absl::StatusOr<std::unique_ptr<RankKv>> {
        follower_layout = pool->layout();
        follower_pages = pool->num_blocks();
        return std::unique_ptr<RankKv>();
      };
      g.rank(1).follower_result = RunGroupFollower(
          *g.rank(1).model->model, o, g.rank(1).comms.get(), g.rank(1).threads.get(), {}, kv);
    });
    EngineOptions base;
    base.kv_cache_bytes = 1 << 20;
    base.kv_cache_dtype = dtype;
    auto engine = Engine::Create(&g.leader_model(), g.LeaderOptions(base));
    ASSERT_TRUE(engine.ok()) << engine.status();
    const TokenEvent e = RunShortRequest(**engine);
    EXPECT_TRUE(e.status.ok()) << e.status;
    const int64_t leader_pages = (*engine)->num_kv_pages();
    EXPECT_EQ((*engine)->kv_layout().dtype, dtype);
    engine->reset();
    g.Join();
    EXPECT_TRUE(g.rank(1).follower_result.ok()) << g.rank(1).follower_result;
    EXPECT_EQ(follower_layout.dtype, dtype);
    EXPECT_EQ(follower_layout.tp_rank, 1);
    EXPECT_EQ(follower_pages, leader_pages);
  }
}

TEST(WorkerGroup, TheLeaderShutsTheFollowersDown) {
  Group g(kTiny, 2, 1);
  EngineOptions base;
  base.kv_cache_bytes = 1 << 20;
  auto engine = Engine::Create(&g.leader_model(), g.LeaderOptions(base));
  ASSERT_TRUE(engine.ok()) << engine.status();
  const TokenEvent e = RunShortRequest(**engine);
  EXPECT_TRUE(e.status.ok()) << e.status;
  EXPECT_TRUE((*engine)->health().ok());
  engine->reset();  // the backend tells the followers to exit
  g.Join();
  EXPECT_TRUE(g.rank(1).follower_result.ok()) << g.rank(1).follower_result;
}

// Rank 1 is connected but never runs a step, as a process stopped with SIGSTOP: the
// leader's request ends with Unavailable within the group's timeout, and the engine
// reports itself unhealthy and refuses new work.
TEST(WorkerGroup, ARankThatHangsFailsTheRequestWithinTheTimeout) {
  const auto timeout = std::chrono::milliseconds(1500);
  Group g(kTiny, 2, 1, timeout, /*start_followers=*/false);
  EngineOptions base;
  base.kv_cache_bytes = 1 << 20;
  const auto start = std::chrono::steady_clock::now();
  auto engine = Engine::Create(&g.leader_model(), g.LeaderOptions(base));
  if (engine.ok()) {
    EXPECT_TRUE(absl::IsUnavailable(RunShortRequest(**engine).status));
    EXPECT_FALSE((*engine)->health().ok());
    const absl::Status again = RunShortRequest(**engine).status;
    EXPECT_TRUE(absl::IsUnavailable(again)) << again;
  } else {
    EXPECT_TRUE(absl::IsDeadlineExceeded(engine.status()) || absl::IsUnavailable(engine.status()))
        << engine.status();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, timeout * 3);
  if (engine.ok()) engine->reset();
  g.rank(1).comms.reset();
}

// Rank 1's sockets close (its process died) before the leader starts.
TEST(WorkerGroup, ARankThatDiedFailsTheLeaderAtOnce) {
  Group g(kTiny, 2, 1, std::chrono::seconds(5), /*start_followers=*/false);
  g.rank(1).comms.reset();
  EngineOptions base;
  base.kv_cache_bytes = 1 << 20;
  const auto start = std::chrono::steady_clock::now();
  auto engine = Engine::Create(&g.leader_model(), g.LeaderOptions(base));
  if (engine.ok()) {
    const absl::Status s = RunShortRequest(**engine).status;
    EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  } else {
    EXPECT_TRUE(absl::IsUnavailable(engine.status()) || absl::IsDeadlineExceeded(engine.status()))
        << engine.status();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

}  // namespace
}  // namespace baton::engine
