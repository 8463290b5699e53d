// The GPU forward (model/arch/llama_gpu.h): its plan, buffers, fused weights, RoPE tables,
// page addressing and graph replay, checked against the float64 reference forward and
// against itself. In the unit build it runs on the host emulation of its kernels
// (tests/fakes/host_gpu_ops.h); built as gpu_forward_test, on a GPU (test_gpu_ops.h).
#include "model/arch/llama_gpu.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "engine/model_runner.h"
#include "gtest/gtest.h"
#include "kvcache/kv_pool.h"
#include "model/model.h"
#include "modelgen/synthetic_model.h"
#include "tests/unit/engine/reference_forward.h"
#include "tests/unit/engine/test_gpu_ops.h"

namespace baton::engine {
namespace {

using model::ForwardOutput;
using model::LlamaGpuForward;
using model::LlamaGpuOptions;
using model::LogitsWanted;
using model::ModelConfig;
using model::SequenceInput;

using testing::ReferenceBaseConfig;
using testing::ReferenceVariant;
using testing::ReferenceVariants;

struct Written {
  std::string dir;
  std::unique_ptr<model::Model> model;
  ~Written() { std::filesystem::remove_all(dir); }
};

std::unique_ptr<Written> Write(const ModelConfig& config, cpu::DType dtype, bool gguf,
                               const std::string& name) {
  auto w = std::make_unique<Written>();
  // The process id too: ctest runs this binary's tests (and the GPU build of this source)
  // in parallel processes, which must not write or remove each other's files.
  w->dir = ::testing::TempDir() + "/baton_gpu_fwd_" + name + "_" + std::to_string(::getpid());
  std::filesystem::remove_all(w->dir);
  modelgen::SyntheticModelSpec spec;
  spec.config = config;
  spec.dtype = dtype;
  spec.seed = 42;
  spec.write_hf = !gguf;
  spec.write_gguf = gguf;
  EXPECT_TRUE(modelgen::WriteSyntheticModel(spec, w->dir).ok());
  auto opened = model::Model::Open(gguf ? w->dir + "/model.gguf" : w->dir);
  EXPECT_TRUE(opened.ok()) << opened.status();
  if (opened.ok()) w->model = *std::move(opened);
  return w;
}

model::Shard Whole(const ModelConfig& c) { return *model::PlanShard(c, model::RankPlacement{}); }

// A forward over `pages` pages of bf16 KV on `ops`, with the pool's memory.
// An engine pool's page ids over `pages` bf16 pages of device memory, as the engine
// makes them (KvPagesOf).
struct DevicePool {
  kernels::GpuBuffer memory;
  std::unique_ptr<kvcache::KvPool> pool;

  DevicePool(kernels::GpuOps* ops, const ModelConfig& c, int64_t pages) {
    const kvcache::PageLayout layout = PageLayoutFor(c, 16, "bf16");
    memory = *kernels::GpuBuffer::Allocate(ops, layout.page_bytes() * pages);
    pool = *kvcache::KvPool::Create(layout, pages, memory.get());
  }
  model::KvPages pages() { return KvPagesOf(pool.get()); }
};

struct Gpu {
  std::unique_ptr<kernels::GpuOps> ops = testing::NewTestGpuOps();
  std::unique_ptr<DevicePool> kv;
  std::unique_ptr<LlamaGpuForward> forward;

  Gpu(const model::Model& m, int64_t pages, LlamaGpuOptions options = {}) {
    if (ops == nullptr) return;
    kv = std::make_unique<DevicePool>(ops.get(), m.config(), pages);
    auto f = LlamaGpuForward::Create(m, Whole(m.config()), ops.get(), nullptr, options);
    EXPECT_TRUE(f.ok()) << f.status();
    if (!f.ok()) return;
    forward = *std::move(f);
    EXPECT_TRUE(forward->BindKv(kv->pages()).ok());
  }
  ~Gpu() {
    forward.reset();  // before its pages and its ops
    kv.reset();
  }
};

double RelativeL2(const std::vector<float>& got, const std::vector<double>& want) {
  double diff = 0, norm = 0;
  for (size_t v = 0; v < want.size(); ++v) {
    diff += (got[v] - want[v]) * (got[v] - want[v]);
    norm += want[v] * want[v];
  }
  return std::sqrt(diff / norm);
}

struct DtypeCase {
  cpu::DType dtype;
  bool gguf;
};

class GpuForwardReferenceTest
    : public ::testing::TestWithParam<std::tuple<ReferenceVariant, DtypeCase>> {};

// Bound on the relative L2 error of a position's logits. Every GEMM input is bf16 on the
// GPU (weights converted at upload, activations at each norm, SwiGLU and attention
// output) with f32 accumulation, and the KV pages are bf16: 2^-9 relative per rounding,
// measured 0.9-1.6% on these models.
constexpr double kBf16Tolerance = 3e-2;

TEST_P(GpuForwardReferenceTest, LogitsMatchFloat64Reference) {
  BATON_SKIP_WITHOUT_TEST_GPU();
  const auto& [variant, dc] = GetParam();
  auto w = Write(variant.config, dc.dtype, dc.gguf,
                 variant.name + "_" + cpu::DTypeName(dc.dtype) + (dc.gguf ? "_gguf" : "_hf"));
  ASSERT_NE(w->model, nullptr);
  const model::Model& m = *w->model;
  std::mt19937 rng(3);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(m.config().vocab_size - 1));
  std::vector<int32_t> tokens(40);
  for (int32_t& t : tokens) t = token(rng);
  // Pages out of order, so that a forward that assumed contiguous pages would fail.
  const std::vector<int32_t> blocks = {5, 0, 7};
  Gpu gpu(m, 8);
  ASSERT_NE(gpu.forward, nullptr);

  ForwardOutput out;
  std::vector<std::vector<float>> got;
  const SequenceInput prefill{std::span(tokens).first(30), 0, blocks, LogitsWanted::kAll};
  ASSERT_TRUE(gpu.forward->Forward(std::span(&prefill, 1), &out).ok());
  for (int i = 0; i < 30; ++i) got.emplace_back(out.row(i).begin(), out.row(i).end());
  for (int64_t p = 30; p < 40; ++p) {
    const SequenceInput step{std::span(tokens).subspan(p, 1), p, blocks, LogitsWanted::kLast};
    ASSERT_TRUE(gpu.forward->Forward(std::span(&step, 1), &out).ok());
    got.emplace_back(out.row(0).begin(), out.row(0).end());
  }
  EXPECT_GT(gpu.forward->graph_replays(), 0) << "decode steps replay a graph by default";

  const auto want = testing::ReferenceForward(m, tokens);
  double worst = 0;
  for (size_t p = 0; p < tokens.size(); ++p) worst = std::max(worst, RelativeL2(got[p], want[p]));
  RecordProperty("worst_relative_l2_error", std::to_string(worst));
  EXPECT_LT(worst, kBf16Tolerance)
      << "worst relative L2 error over " << tokens.size() << " positions";
}

std::string Name(const ::testing::TestParamInfo<std::tuple<ReferenceVariant, DtypeCase>>& info) {
  const auto& [v, d] = info.param;
  return v.name + "_" + cpu::DTypeName(d.dtype) + (d.gguf ? "_gguf" : "_hf");
}

INSTANTIATE_TEST_SUITE_P(AllVariants, GpuForwardReferenceTest,
                         ::testing::Combine(::testing::ValuesIn(ReferenceVariants()),
                                            ::testing::Values(DtypeCase{cpu::DType::kF32, false},
                                                              DtypeCase{cpu::DType::kBF16, true},
                                                              DtypeCase{cpu::DType::kQ8_0, true})),
                         Name);

class GpuForwardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    BATON_SKIP_WITHOUT_TEST_GPU();
    w_ = Write(ReferenceBaseConfig(), cpu::DType::kBF16, false, "base");
    ASSERT_NE(w_->model, nullptr);
    std::mt19937 rng(7);
    std::uniform_int_distribution<int32_t> token(0, 299);
    for (auto* v : {&a_, &b_, &c_}) {
      v->resize(40);
      for (int32_t& t : *v) t = token(rng);
    }
  }

  // Logits of `prompt`'s prefill (last row), then of `decode` steps one by one.
  std::vector<std::vector<float>> Run(LlamaGpuForward* f, const std::vector<int32_t>& tokens,
                                      int prompt, const std::vector<int32_t>& blocks) {
    std::vector<std::vector<float>> rows;
    ForwardOutput out;
    const SequenceInput first{std::span(tokens).first(prompt), 0, blocks, LogitsWanted::kLast};
    EXPECT_TRUE(f->Forward(std::span(&first, 1), &out).ok());
    rows.emplace_back(out.row(0).begin(), out.row(0).end());
    for (size_t p = prompt; p < tokens.size(); ++p) {
      const SequenceInput step{std::span(tokens).subspan(p, 1), static_cast<int64_t>(p), blocks,
                               LogitsWanted::kLast};
      EXPECT_TRUE(f->Forward(std::span(&step, 1), &out).ok());
      rows.emplace_back(out.row(0).begin(), out.row(0).end());
    }
    return rows;
  }

  std::unique_ptr<Written> w_;
  std::vector<int32_t> a_, b_, c_;
};

TEST_F(GpuForwardTest, GraphReplaysGiveTheEagerStepsBits) {
  LlamaGpuOptions eager;
  eager.use_graphs = false;
  Gpu g1(*w_->model, 8), g2(*w_->model, 8, eager);
  const std::vector<int32_t> blocks = {3, 1, 6};
  EXPECT_EQ(Run(g1.forward.get(), a_, 25, blocks), Run(g2.forward.get(), a_, 25, blocks));
  EXPECT_EQ(g1.forward->graphs_captured(), 1) << "15 steps of batch 1, contexts up to 40";
  EXPECT_EQ(g1.forward->graph_replays(), 15);
  EXPECT_EQ(g2.forward->graph_replays(), 0);
}

TEST_F(GpuForwardTest, ASequenceGetsTheSameBitsAloneAndInABatch) {
  Gpu alone(*w_->model, 12), batched(*w_->model, 12);
  const std::vector<int32_t> ba = {2, 9, 4}, bb = {0, 5, 11}, bc = {7, 8, 10};
  const auto want = Run(alone.forward.get(), a_, 20, ba);

  // a runs beside b (a longer prompt, then decode) and c (prompt logits of every position,
  // so its steps never take a graph): mixed decode and prefill steps of several shapes.
  ForwardOutput out;
  std::vector<std::vector<float>> got;
  const SequenceInput a0{std::span(a_).first(20), 0, ba, LogitsWanted::kLast};
  const SequenceInput b0{std::span(b_).first(33), 0, bb, LogitsWanted::kLast};
  std::vector<SequenceInput> step = {b0, a0};
  ASSERT_TRUE(batched.forward->Forward(step, &out).ok());
  got.emplace_back(out.row(out.first_row[1]).begin(), out.row(out.first_row[1]).end());
  for (int64_t p = 20; p < 40; ++p) {
    step.clear();
    step.push_back({std::span(a_).subspan(p, 1), p, ba, LogitsWanted::kLast});
    if (p - 20 + 33 < 40)
      step.push_back({std::span(b_).subspan(p - 20 + 33, 1), p - 20 + 33, bb, LogitsWanted::kLast});
    if (p < 24)
      step.push_back(
          {std::span(c_).subspan((p - 20) * 5, 5), (p - 20) * 5, bc, LogitsWanted::kAll});
    ASSERT_TRUE(batched.forward->Forward(step, &out).ok());
    got.emplace_back(out.row(out.first_row[0]).begin(), out.row(out.first_row[0]).end());
  }
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i]) << "step " << i;
}

TEST_F(GpuForwardTest, ChunkedPrefillAfterACachedPrefixGivesTheWholePromptsLogits) {
  Gpu whole(*w_->model, 8), chunked(*w_->model, 8);
  const std::vector<int32_t> blocks = {4, 2, 0};
  ForwardOutput one, out;
  const SequenceInput all{std::span(a_).first(37), 0, blocks, LogitsWanted::kLast};
  ASSERT_TRUE(whole.forward->Forward(std::span(&all, 1), &one).ok());
  for (int start : {0, 16, 30}) {  // chunks of 16, 14 and 7, the second across a page
    const int end = start == 30 ? 37 : (start == 0 ? 16 : 30);
    const SequenceInput chunk{std::span(a_).subspan(start, end - start), start, blocks,
                              LogitsWanted::kLast};
    ASSERT_TRUE(chunked.forward->Forward(std::span(&chunk, 1), &out).ok());
  }
  ASSERT_EQ(out.logits.size(), one.logits.size());
  for (size_t v = 0; v < one.logits.size(); ++v) {
    EXPECT_NEAR(out.logits[v], one.logits[v], 1e-5f * (1 + std::abs(one.logits[v])));
  }
}

int32_t FirstMax(std::span<const float> row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

// A greedy sequence gets its id instead of its row; the others keep their rows, bit for
// bit; a decode step of greedy sequences (a graph's) sends no row at all.
TEST_F(GpuForwardTest, GreedySequencesGetTheirIdInsteadOfTheirRow) {
  Gpu plain(*w_->model, 12), greedy(*w_->model, 12);
  const std::vector<int32_t> ba = {2, 9, 4}, bb = {0, 5, 11}, bc = {7, 8, 10};
  std::vector<SequenceInput> step = {{std::span(a_).first(20), 0, ba, LogitsWanted::kLast},
                                     {std::span(b_).first(9), 0, bb, LogitsWanted::kAll},
                                     {std::span(c_).first(30), 0, bc, LogitsWanted::kLast}};
  ForwardOutput want, got;
  ASSERT_TRUE(plain.forward->Forward(step, &want).ok());
  EXPECT_TRUE(want.greedy_ids.empty() || want.greedy_ids == std::vector<int32_t>(3, -1));
  step[0].greedy = step[1].greedy = step[2].greedy = true;  // b wants all rows: not served
  ASSERT_TRUE(greedy.forward->Forward(step, &got).ok());
  ASSERT_EQ(got.greedy_ids.size(), 3u);
  EXPECT_EQ(got.first_row, (std::vector<int64_t>{-1, 0, -1}));
  EXPECT_EQ(got.logits.size(), 9 * want.vocab_size);
  EXPECT_EQ(got.greedy_ids[0], FirstMax(want.row(want.first_row[0])));
  EXPECT_EQ(got.greedy_ids[1], -1);
  EXPECT_EQ(got.greedy_ids[2], FirstMax(want.row(want.first_row[2])));
  for (int i = 0; i < 9; ++i) {
    const auto w = want.row(want.first_row[1] + i), g = got.row(i);
    EXPECT_TRUE(std::equal(w.begin(), w.end(), g.begin())) << "row " << i;
  }
  // Decode: a and c greedy, b sampled.
  std::vector<SequenceInput> decode = {{std::span(a_).subspan(20, 1), 20, ba, LogitsWanted::kLast},
                                       {std::span(b_).subspan(9, 1), 9, bb, LogitsWanted::kLast},
                                       {std::span(c_).subspan(30, 1), 30, bc, LogitsWanted::kLast}};
  ASSERT_TRUE(plain.forward->Forward(decode, &want).ok());
  decode[0].greedy = decode[2].greedy = true;
  ASSERT_TRUE(greedy.forward->Forward(decode, &got).ok());
  EXPECT_EQ(got.first_row, (std::vector<int64_t>{-1, 0, -1}));
  EXPECT_EQ(got.greedy_ids,
            (std::vector<int32_t>{FirstMax(want.row(0)), -1, FirstMax(want.row(2))}));
  const auto w = want.row(1), g = got.row(0);
  EXPECT_TRUE(std::equal(w.begin(), w.end(), g.begin()));
  EXPECT_GT(greedy.forward->graph_replays(), 0);
}

TEST_F(GpuForwardTest, StepsPastItsLimitsAreRefusedAndMemoryIsReturned) {
  auto ops = testing::NewTestGpuOps();
  ASSERT_NE(ops, nullptr);
  fakes::HostGpuOps* emulation = testing::Emulation(ops.get());
  const ModelConfig& c = w_->model->config();
  DevicePool kv(ops.get(), c, 4);
  const int64_t before = emulation != nullptr ? emulation->device_bytes_in_use() : 0;
  {
    LlamaGpuOptions small;
    small.max_tokens = 16;
    small.max_seqs = 4;
    auto f = LlamaGpuForward::Create(*w_->model, Whole(c), ops.get(), nullptr, small);
    ASSERT_TRUE(f.ok()) << f.status();
    const std::vector<int32_t> none = {0};
    const SequenceInput early{std::span(a_).first(1), 0, none, LogitsWanted::kLast};
    ForwardOutput unbound;
    EXPECT_EQ((*f)->Forward(std::span(&early, 1), &unbound).code(),
              absl::StatusCode::kFailedPrecondition);
    model::KvPages wrong = kv.pages();
    wrong.layer_elements /= 2;  // one KV head a layer
    EXPECT_EQ((*f)->BindKv(wrong).code(), absl::StatusCode::kInvalidArgument);
    ASSERT_TRUE((*f)->BindKv(kv.pages()).ok());
    if (emulation != nullptr) {
      EXPECT_GT(emulation->device_bytes_in_use(), before);
    }
    const std::vector<int32_t> blocks = {0, 1};
    ForwardOutput out;
    const SequenceInput big{std::span(a_).first(17), 0, blocks, LogitsWanted::kLast};
    EXPECT_EQ((*f)->Forward(std::span(&big, 1), &out).code(), absl::StatusCode::kInvalidArgument);
    const SequenceInput fits{std::span(a_).first(16), 0, blocks, LogitsWanted::kLast};
    EXPECT_TRUE((*f)->Forward(std::span(&fits, 1), &out).ok());
  }
  if (emulation != nullptr) {
    EXPECT_EQ(emulation->device_bytes_in_use(), before) << "the forward frees what it allocated";
  }

  model::Shard staged = Whole(c);
  staged.at.pp_size = 2;
  EXPECT_EQ(LlamaGpuForward::Create(*w_->model, staged, ops.get(), nullptr, {}).status().code(),
            absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace baton::engine
