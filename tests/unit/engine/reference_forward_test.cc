// The optimized CPU forward against a float64 reference (reference_forward.h) on random
// small models of every supported variant, written to disk by the synthetic-model writer
// and read back by the real loaders, for every weight type and both file formats.
#include "tests/unit/engine/reference_forward.h"

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

namespace baton::engine {
namespace {

using model::ModelConfig;

using testing::ReferenceVariant;
using testing::ReferenceVariants;

struct DtypeCase {
  cpu::DType dtype;
  bool gguf;
  // Bound on ||engine - reference||_2 / ||reference||_2 over a position's logits. f32, f16
  // and Q8_0 weights widen exactly to f32, so only f32 arithmetic separates them from
  // float64 (measured ~1e-6). The bf16 kernel rounds activations to bf16 for vdpbf16ps
  // (docs/perf/kernels.md), about 2^-9 relative per product (measured 0.7-1.2%).
  double tolerance;
  // The engine's KV pages. f32 for the weight cases above: the reference keeps K/V exact,
  // and bf16 pages would add their own rounding (~2^-9 per element) to every bound.
  std::string kv_dtype = "f32";
  // How the reference keeps K/V. With f32 weights and bf16 pages it rounds them to bf16
  // as the pages do, so only f32 arithmetic, and the few K/V values that f32 error moves
  // across a bf16 rounding boundary, separate the two: measured 1.4e-5 to 4.9e-4, against
  // 3.7e-3 to 9.0e-3 from the exact reference, so the bound 1.5e-3 tells whether the
  // pages hold what the reference rounds. With bf16 weights the engine's K/V already carry
  // ~1% from the bf16 activations, and rounding the reference's exact K/V adds an error of
  // its own rather than removing one, so that case meets the exact reference (measured
  // 0.9-1.6%, against 0.7-1.2% on f32 pages: within the bf16 bound).
  testing::KvStorage reference_kv = testing::KvStorage::kExact;
};

class ReferenceForwardTest
    : public ::testing::TestWithParam<std::tuple<ReferenceVariant, DtypeCase>> {};

TEST_P(ReferenceForwardTest, LogitsMatchFloat64Reference) {
  const auto& [variant, dc] = GetParam();
  const std::string dir = ::testing::TempDir() + "/baton_ref_" + variant.name + "_" +
                          cpu::DTypeName(dc.dtype) + (dc.gguf ? "_gguf" : "_hf") + "_kv_" +
                          dc.kv_dtype;
  std::filesystem::remove_all(dir);
  modelgen::SyntheticModelSpec spec;
  spec.config = variant.config;
  spec.dtype = dc.dtype;
  spec.seed = 42;
  spec.write_hf = !dc.gguf;
  spec.write_gguf = dc.gguf;
  ASSERT_TRUE(modelgen::WriteSyntheticModel(spec, dir).ok());
  auto opened = model::Model::Open(dc.gguf ? dir + "/model.gguf" : dir);
  ASSERT_TRUE(opened.ok()) << opened.status();
  const model::Model& m = **opened;
  EXPECT_EQ(m.weights().layers[0].q.weight.dtype, dc.dtype) << "weights must stay in place";

  std::mt19937 rng(3);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(m.config().vocab_size - 1));
  std::vector<int32_t> tokens(40);
  for (int32_t& t : tokens) t = token(rng);

  auto pool = *kvcache::KvPool::Create(PageLayoutFor(m.config(), 16, dc.kv_dtype), 8);
  std::vector<int32_t> blocks;
  while (pool->num_free_blocks() > 0) blocks.push_back(*pool->Allocate());
  ThreadPool threads(2);
  ModelRunner runner(m, pool.get(), &threads);
  // A prompt chunk, then decode steps: both paths against the reference.
  ForwardOutput out;
  std::vector<std::vector<float>> got;
  const SequenceInput prefill{std::span(tokens).first(30), 0, blocks, LogitsWanted::kAll};
  ASSERT_TRUE(runner.Forward(std::span(&prefill, 1), &out).ok());
  for (int i = 0; i < 30; ++i) got.emplace_back(out.row(i).begin(), out.row(i).end());
  for (int64_t p = 30; p < 40; ++p) {
    const SequenceInput step{std::span(tokens).subspan(p, 1), p, blocks, LogitsWanted::kLast};
    ASSERT_TRUE(runner.Forward(std::span(&step, 1), &out).ok());
    got.emplace_back(out.row(0).begin(), out.row(0).end());
  }

  const auto want = testing::ReferenceForward(m, tokens, dc.reference_kv);
  double worst = 0;
  for (size_t p = 0; p < tokens.size(); ++p) {
    double diff = 0, norm = 0;
    for (size_t v = 0; v < want[p].size(); ++v) {
      diff += (got[p][v] - want[p][v]) * (got[p][v] - want[p][v]);
      norm += want[p][v] * want[p][v];
    }
    ASSERT_GT(norm, 0);
    worst = std::max(worst, std::sqrt(diff / norm));
  }
  RecordProperty("worst_relative_l2_error", std::to_string(worst));
  EXPECT_LT(worst, dc.tolerance) << "worst relative L2 error over " << tokens.size()
                                 << " positions";
  std::filesystem::remove_all(dir);
}

std::string Name(const ::testing::TestParamInfo<std::tuple<ReferenceVariant, DtypeCase>>& info) {
  const auto& [v, d] = info.param;
  return v.name + "_" + cpu::DTypeName(d.dtype) + (d.gguf ? "_gguf" : "_hf") + "_kv_" + d.kv_dtype;
}

INSTANTIATE_TEST_SUITE_P(
    AllVariants, ReferenceForwardTest,
    ::testing::Combine(
        ::testing::ValuesIn(ReferenceVariants()),
        ::testing::Values(
            DtypeCase{cpu::DType::kF32, false, 1e-5}, DtypeCase{cpu::DType::kF32, true, 1e-5},
            DtypeCase{cpu::DType::kF16, false, 1e-5}, DtypeCase{cpu::DType::kBF16, false, 2e-2},
            DtypeCase{cpu::DType::kBF16, true, 2e-2}, DtypeCase{cpu::DType::kQ8_0, true, 1e-5},
            DtypeCase{cpu::DType::kF32, false, 1.5e-3, "bf16", testing::KvStorage::kBf16},
            DtypeCase{cpu::DType::kF32, true, 1.5e-3, "bf16", testing::KvStorage::kBf16},
            DtypeCase{cpu::DType::kBF16, true, 2e-2, "bf16", testing::KvStorage::kExact})),
    Name);

}  // namespace
}  // namespace baton::engine
