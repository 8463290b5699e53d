// The optimized CPU forward against a float64 reference (reference_forward.h) on random
// small models of every supported variant, written to disk by the synthetic-model writer
// and read back by the real loaders, for every weight type and both file formats.
#include "tests/unit/engine/reference_forward.h"

#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "engine/kv_pool.h"
#include "engine/model_runner.h"
#include "gtest/gtest.h"
#include "model/model.h"
#include "model/synthetic_model.h"

namespace baton::engine {
namespace {

using model::ModelConfig;

struct Variant {
  std::string name;
  ModelConfig config;
};

ModelConfig Base() {
  ModelConfig c;
  c.architecture = "LlamaForCausalLM";
  c.vocab_size = 300;
  c.hidden_size = 64;
  c.intermediate_size = 96;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 10000;
  c.max_position_embeddings = 256;
  c.tie_word_embeddings = false;
  return c;
}

std::vector<Variant> Variants() {
  std::vector<Variant> v;
  v.push_back({"gqa2_untied", Base()});
  ModelConfig mha = Base();
  mha.num_kv_heads = 4;
  mha.tie_word_embeddings = true;
  v.push_back({"mha_tied", mha});
  ModelConfig mqa = Base();
  mqa.num_kv_heads = 1;
  v.push_back({"mqa", mqa});
  ModelConfig gqa4 = Base();
  gqa4.num_heads = 8;
  gqa4.head_dim = 8;
  gqa4.num_kv_heads = 2;
  v.push_back({"gqa4_headdim8", gqa4});
  ModelConfig qwen = Base();
  qwen.architecture = "Qwen2ForCausalLM";
  qwen.attention_bias = true;
  qwen.tie_word_embeddings = true;
  qwen.rope_theta = 1000000;
  v.push_back({"qwen2_bias", qwen});
  ModelConfig llama3 = Base();
  llama3.rope_theta = 500000;
  llama3.rope_scaling.type = model::RopeScaling::Type::kLlama3;
  llama3.rope_scaling.factor = 8;
  llama3.rope_scaling.low_freq_factor = 1;
  llama3.rope_scaling.high_freq_factor = 4;
  llama3.rope_scaling.original_max_position = 64;
  v.push_back({"llama3_rope_scaling", llama3});
  ModelConfig linear = Base();
  linear.rope_scaling.type = model::RopeScaling::Type::kLinear;
  linear.rope_scaling.factor = 4;
  v.push_back({"linear_rope_scaling", linear});
  return v;
}

struct DtypeCase {
  cpu::DType dtype;
  bool gguf;
  // Bound on ||engine - reference||_2 / ||reference||_2 over a position's logits. f32, f16
  // and Q8_0 weights widen exactly to f32, so only f32 arithmetic separates them from
  // float64 (measured ~1e-6). The bf16 kernel rounds activations to bf16 for vdpbf16ps
  // (docs/perf/kernels.md), about 2^-9 relative per product (measured 0.7-1.2%).
  double tolerance;
};

class ReferenceForwardTest : public ::testing::TestWithParam<std::tuple<Variant, DtypeCase>> {};

TEST_P(ReferenceForwardTest, LogitsMatchFloat64Reference) {
  const auto& [variant, dc] = GetParam();
  const std::string dir = ::testing::TempDir() + "/baton_ref_" + variant.name + "_" +
                          cpu::DTypeName(dc.dtype) + (dc.gguf ? "_gguf" : "_hf");
  std::filesystem::remove_all(dir);
  model::SyntheticModelSpec spec;
  spec.config = variant.config;
  spec.dtype = dc.dtype;
  spec.seed = 42;
  spec.write_hf = !dc.gguf;
  spec.write_gguf = dc.gguf;
  ASSERT_TRUE(model::WriteSyntheticModel(spec, dir).ok());
  auto opened = model::Model::Open(dc.gguf ? dir + "/model.gguf" : dir);
  ASSERT_TRUE(opened.ok()) << opened.status();
  const model::Model& m = **opened;
  EXPECT_EQ(m.weights().layers[0].q.weight.dtype, dc.dtype) << "weights must stay in place";

  std::mt19937 rng(3);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(m.config().vocab_size - 1));
  std::vector<int32_t> tokens(40);
  for (int32_t& t : tokens) t = token(rng);

  auto pool = *KvPool::Create(PageLayoutFor(m.config(), 16), 8);
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

  const auto want = testing::ReferenceForward(m, tokens);
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

std::string Name(const ::testing::TestParamInfo<std::tuple<Variant, DtypeCase>>& info) {
  const auto& [v, d] = info.param;
  return v.name + "_" + cpu::DTypeName(d.dtype) + (d.gguf ? "_gguf" : "_hf");
}

INSTANTIATE_TEST_SUITE_P(
    AllVariants, ReferenceForwardTest,
    ::testing::Combine(::testing::ValuesIn(Variants()),
                       ::testing::Values(DtypeCase{cpu::DType::kF32, false, 1e-5},
                                         DtypeCase{cpu::DType::kF32, true, 1e-5},
                                         DtypeCase{cpu::DType::kF16, false, 1e-5},
                                         DtypeCase{cpu::DType::kBF16, false, 2e-2},
                                         DtypeCase{cpu::DType::kBF16, true, 2e-2},
                                         DtypeCase{cpu::DType::kQ8_0, true, 1e-5})),
    Name);

}  // namespace
}  // namespace baton::engine
