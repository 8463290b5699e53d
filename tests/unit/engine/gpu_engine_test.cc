// The engine on the GPU backend (engine/gpu_backend.h): continuous batching, chunked
// prefill, the prefix cache and preemption give each request the tokens it gets alone on
// the same backend, every page comes back, and greedy tokens agree with the CPU
// backend's. The kernels are the host emulation in the unit build, a GPU's in
// gpu_engine_test (test_gpu_ops.h).
#include "engine/gpu_backend.h"

#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/strings.h"
#include "engine/engine.h"
#include "engine/model_runner.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/drain_stream.h"
#include "tests/unit/engine/test_gpu_ops.h"

namespace baton::engine {
namespace {

using ::baton::testing::Drain;
using ::baton::testing::Outcome;

const std::string kTiny = std::string(BATON_SOURCE_DIR) + "/models/baton-tiny";
const std::string kStories =
    std::string(BATON_TESTDATA_DIR) + "/models/stories260K/stories260K.gguf";

EngineOptions SmallOptions() {
  EngineOptions o;
  o.threads = 2;
  o.max_batched_tokens = 96;
  o.max_prefill_chunk = 32;
  o.max_running = 8;
  return o;
}

// An engine on the emulated GPU; the GpuEngine outlives the engine.
struct GpuRun {
  std::unique_ptr<GpuEngine> gpu;
  std::unique_ptr<Engine> engine;
};

GpuRun StartGpu(const LoadedModel& m, EngineOptions o, GpuEngineOptions g = {}) {
  GpuRun run;
  auto ops = testing::NewTestGpuOps();
  if (ops == nullptr) return run;
  auto gpu = GpuEngine::Create(*m.model, std::move(ops), o, g);
  EXPECT_TRUE(gpu.ok()) << gpu.status();
  if (!gpu.ok()) return run;
  run.gpu = *std::move(gpu);
  const absl::Status configured = run.gpu->Configure(&o);
  EXPECT_TRUE(configured.ok()) << configured;
  auto engine = Engine::Create(&m, o);
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (engine.ok()) run.engine = *std::move(engine);
  return run;
}

std::vector<EngineRequest> Requests(const LoadedModel& m, int n, uint32_t seed) {
  std::mt19937 rng(seed);
  const int32_t vocab = static_cast<int32_t>(
      std::min<int64_t>(m.model->config().vocab_size, m.tokenizer.tokenizer->vocab_size()));
  std::vector<int32_t> prefix;
  for (int i = 0; i < 40; ++i) prefix.push_back(3 + static_cast<int32_t>(rng() % (vocab - 3)));
  std::vector<EngineRequest> out;
  for (int i = 0; i < n; ++i) {
    EngineRequest r;
    r.id = StrCat("r", i);
    if (i % 3 != 2) r.prompt_ids = prefix;
    const int extra = 1 + static_cast<int>(rng() % 37);
    for (int k = 0; k < extra; ++k) {
      r.prompt_ids.push_back(3 + static_cast<int32_t>(rng() % (vocab - 3)));
    }
    r.params.max_tokens = 4 + static_cast<int64_t>(rng() % 30);
    r.params.seed = 1000 + i;
    r.params.ignore_eos = true;
    if (i % 2 == 0) {
      r.params.temperature = 0;
    } else {
      r.params.temperature = 0.8;
      r.params.top_p = 0.95;
    }
    out.push_back(std::move(r));
  }
  return out;
}

void ExpectNoLeaks(Engine* engine) {
  engine->WaitIdle();
  const EngineStats s = engine->Stats();
  EXPECT_EQ(s.running, 0);
  EXPECT_EQ(s.pages_used, 0);
  EXPECT_EQ(s.pages_free, s.pages_total);
}

class GpuEngineTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    BATON_SKIP_WITHOUT_TEST_GPU();
    const std::string path = GetParam() == "stories260K" ? kStories : kTiny;
    if (!std::filesystem::exists(path)) {
      GTEST_SKIP() << path << " is absent (../shared/testdata); skipping";
    }
    auto m = LoadModel(path);
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::make_unique<LoadedModel>(std::move(*m));
  }
  std::unique_ptr<LoadedModel> model_;
};

// Each request alone on the GPU backend, then all of them at once in a pool small enough
// to force preemption and with prefix-cache hits: the same tokens.
TEST_P(GpuEngineTest, ConcurrentRequestsMatchEachAloneUnderPreemption) {
  const std::vector<EngineRequest> requests = Requests(*model_, 10, 5);
  std::vector<std::vector<int32_t>> alone;
  {
    GpuRun run = StartGpu(*model_, SmallOptions());
    ASSERT_NE(run.engine, nullptr);
    for (const EngineRequest& r : requests) {
      auto s = run.engine->Submit(r);
      ASSERT_TRUE(s.ok()) << s.status();
      const Outcome o = Drain(s->get());
      ASSERT_TRUE(o.last.status.ok()) << o.last.status;
      alone.push_back(o.ids);
    }
    ExpectNoLeaks(run.engine.get());
  }
  EngineOptions o = SmallOptions();
  // Room for the largest request (40 + 37 + 33 tokens) and a little more.
  o.kv_cache_bytes = 10 * PageLayoutFor(model_->model->config(), o.block_size, "bf16").page_bytes();
  GpuRun run = StartGpu(*model_, o);
  ASSERT_NE(run.engine, nullptr);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const EngineRequest& r : requests) streams.push_back(*run.engine->Submit(r));
  for (size_t i = 0; i < streams.size(); ++i) {
    const Outcome got = Drain(streams[i].get());
    ASSERT_TRUE(got.last.status.ok()) << got.last.status;
    EXPECT_EQ(got.ids, alone[i]) << requests[i].id;
  }
  ExpectNoLeaks(run.engine.get());
  const EngineStats s = run.engine->Stats();
  EXPECT_GT(s.preemptions, 0) << "the small pool did not force a preemption";
  EXPECT_GT(s.prefix_hit_tokens, 0);
  EXPECT_GT(run.gpu->forward()->graph_replays(), 0) << "decode steps replay graphs";
}

// Greedy tokens against the CPU backend's (f32 KV, f32 activations). The GPU rounds GEMM
// inputs and KV to bf16, so a near tie may break the other way; the first tokens agree.
TEST_P(GpuEngineTest, GreedyTokensAgreeWithTheCpuBackend) {
  std::vector<EngineRequest> requests = Requests(*model_, 6, 9);
  EngineOptions cpu_options = SmallOptions();
  cpu_options.kv_cache_bytes = int64_t{16} << 20;
  cpu_options.kv_cache_dtype = "f32";
  auto cpu = Engine::Create(model_.get(), cpu_options);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  GpuRun gpu = StartGpu(*model_, SmallOptions());
  ASSERT_NE(gpu.engine, nullptr);
  int agreeing = 0;
  for (EngineRequest& r : requests) {
    r.params.temperature = 0;
    r.params.max_tokens = 8;
    const Outcome want = Drain((*cpu)->Submit(r)->get());
    const Outcome got = Drain(gpu.engine->Submit(r)->get());
    ASSERT_EQ(got.ids.size(), want.ids.size());
    EXPECT_EQ(got.ids[0], want.ids[0]) << r.id << ": the first token";
    agreeing += got.ids == want.ids;
  }
  EXPECT_GE(agreeing, 5) << "of 6 greedy sequences of 8 tokens";
}

INSTANTIATE_TEST_SUITE_P(Models, GpuEngineTest, ::testing::Values("baton-tiny", "stories260K"));

TEST(GpuEngineConfigTest, TheKvBudgetComesFromTheDevicesFreeMemory) {
  BATON_SKIP_WITHOUT_TEST_GPU();
  auto m = LoadModel(kTiny);
  ASSERT_TRUE(m.ok()) << m.status();
  auto ops = testing::NewTestGpuOps();
  ASSERT_NE(ops, nullptr);
  kernels::GpuOps* raw = ops.get();
  GpuEngineOptions g;
  g.kv_memory_fraction = 0.5;
  auto gpu = GpuEngine::Create(*m->model, std::move(ops), SmallOptions(), g);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  const int64_t free = *raw->FreeMemoryBytes();
  EngineOptions o = SmallOptions();
  ASSERT_TRUE((*gpu)->Configure(&o).ok());
  const int64_t page = PageLayoutFor(m->model->config(), o.block_size, "bf16").page_bytes();
  EXPECT_EQ(o.kv_cache_bytes, free / 2 / page * page);
  EXPECT_EQ((*gpu)->kv_bytes(), o.kv_cache_bytes);

  gpu->reset();
  auto full = GpuEngine::Create(*m->model, testing::NewTestGpuOps(), SmallOptions(), {});
  ASSERT_TRUE(full.ok());
  EngineOptions huge = SmallOptions();
  huge.kv_cache_bytes = int64_t{1} << 40;
  EXPECT_EQ((*full)->Configure(&huge).code(), absl::StatusCode::kResourceExhausted);
  GpuEngineOptions bad;
  bad.kv_memory_fraction = 1.5;
  EXPECT_EQ(
      GpuEngine::Create(*m->model, testing::NewTestGpuOps(), SmallOptions(), bad).status().code(),
      absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace baton::engine
