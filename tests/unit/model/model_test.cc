#include "model/model.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/gguf_loader.h"
#include "model/hf_loader.h"
#include "model/rope_frequencies.h"
#include "model/safetensors.h"
#include "model_test_util.h"
#include "modelgen/safetensors_writer.h"
#include "modelgen/synthetic_model.h"
#include "nlohmann/json.hpp"

namespace baton::model {
namespace {

using modelgen::kSyntheticEosId;
using modelgen::SafetensorsWriter;
using modelgen::SyntheticGgufBytes;
using modelgen::SyntheticModelSpec;
using modelgen::SyntheticShape;
using modelgen::WriteSyntheticModel;

using testing::BytesOf;
using ::testing::HasSubstr;
using testing::ReadFile;
using testing::RowOf;
using testing::TempDir;
using testing::WriteFile;

constexpr const char* kStories = "models/stories260K";

// GGUF llama row p holds HF row HfRow(p): llama.cpp's `permute` pairs rotary dims.
int64_t HfRow(int64_t p, int64_t head_dim) {
  const int64_t h = p / head_dim, i = p % head_dim;
  return h * head_dim + (i % 2) * (head_dim / 2) + i / 2;
}

// Expects `gguf` to be `hf` with its rows permuted per head (byte-exact).
void ExpectPermutedRows(const cpu::MatrixRef& hf, const cpu::MatrixRef& gguf, int64_t head_dim,
                        const std::string& what) {
  ASSERT_EQ(hf.rows, gguf.rows) << what;
  ASSERT_EQ(hf.cols, gguf.cols) << what;
  ASSERT_EQ(hf.dtype, gguf.dtype) << what;
  const size_t row_bytes = cpu::RowBytes(hf.dtype, hf.cols);
  for (int64_t p = 0; p < gguf.rows; ++p) {
    const auto* g = static_cast<const char*>(gguf.data) + p * row_bytes;
    const auto* h = static_cast<const char*>(hf.data) + HfRow(p, head_dim) * row_bytes;
    ASSERT_EQ(std::memcmp(g, h, row_bytes), 0) << what << " row " << p;
  }
}

void ExpectSameMatrix(const cpu::MatrixRef& a, const cpu::MatrixRef& b, const std::string& what) {
  EXPECT_EQ(a.dtype, b.dtype) << what;
  EXPECT_EQ(a.rows, b.rows) << what;
  EXPECT_EQ(a.cols, b.cols) << what;
  EXPECT_TRUE(BytesOf(a) == BytesOf(b)) << what;
}

// Compares an HF and a GGUF copy of one model: every tensor equal, Q/K permuted.
void ExpectSameWeights(const Model& hf, const Model& gguf, bool permuted) {
  const Weights& h = hf.weights();
  const Weights& g = gguf.weights();
  const int64_t head_dim = hf.config().head_dim;
  ExpectSameMatrix(h.embedding, g.embedding, "embedding");
  ExpectSameMatrix(h.lm_head, g.lm_head, "lm_head");
  EXPECT_EQ(h.final_norm, g.final_norm);
  ASSERT_EQ(h.layers.size(), g.layers.size());
  for (size_t i = 0; i < h.layers.size(); ++i) {
    const LayerWeights& a = h.layers[i];
    const LayerWeights& b = g.layers[i];
    const std::string l = "layer " + std::to_string(i);
    if (permuted) {
      ExpectPermutedRows(a.q.weight, b.q.weight, head_dim, l + " q");
      ExpectPermutedRows(a.k.weight, b.k.weight, head_dim, l + " k");
    } else {
      ExpectSameMatrix(a.q.weight, b.q.weight, l + " q");
      ExpectSameMatrix(a.k.weight, b.k.weight, l + " k");
    }
    ExpectSameMatrix(a.v.weight, b.v.weight, l + " v");
    ExpectSameMatrix(a.o.weight, b.o.weight, l + " o");
    ExpectSameMatrix(a.gate.weight, b.gate.weight, l + " gate");
    ExpectSameMatrix(a.up.weight, b.up.weight, l + " up");
    ExpectSameMatrix(a.down.weight, b.down.weight, l + " down");
    EXPECT_EQ(a.attn_norm, b.attn_norm) << l;
    EXPECT_EQ(a.mlp_norm, b.mlp_norm) << l;
    EXPECT_EQ(a.v.bias, b.v.bias) << l;
    ASSERT_EQ(a.q.bias.size(), b.q.bias.size()) << l;
    for (size_t r = 0; r < a.q.bias.size(); ++r) {
      const size_t src = permuted ? HfRow(static_cast<int64_t>(r), head_dim) : r;
      EXPECT_EQ(b.q.bias[r], a.q.bias[src]) << l << " q bias " << r;
    }
  }
}

// ---- stories260K: a real model in both formats ----

TEST(ModelTest, OpensStories260KGguf) {
  BATON_REQUIRE_MODEL_TESTDATA(kStories);
  const std::string path = testing::TestDataPath(kStories) + "/stories260K.gguf";
  std::vector<std::pair<uint64_t, uint64_t>> calls;
  absl::StatusOr<std::unique_ptr<Model>> m =
      Model::Open(path, {.progress = [&](uint64_t d, uint64_t t) { calls.emplace_back(d, t); }});
  ASSERT_TRUE(m.ok()) << m.status();
  const ModelConfig& c = (*m)->config();
  EXPECT_EQ((*m)->format(), "gguf");
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.intermediate_size, 172);
  EXPECT_EQ(c.num_layers, 5);
  EXPECT_EQ(c.num_heads, 8);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);  // absent from the metadata: the default
  EXPECT_NEAR(c.rms_norm_eps, 1e-5, 1e-10);
  EXPECT_EQ(c.rope_layout, RopeLayout::kInterleaved);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_THAT(c.eos_token_ids, ::testing::ElementsAre(2));
  const Weights& w = (*m)->weights();
  EXPECT_EQ(w.embedding.dtype, cpu::DType::kF32);
  EXPECT_EQ(w.embedding.rows, 512);
  EXPECT_EQ(w.embedding.cols, 64);
  EXPECT_EQ(w.layers.size(), 5u);
  EXPECT_EQ(w.layers[0].k.weight.rows, 32);
  EXPECT_EQ(w.layers[0].down.weight.cols, 172);
  EXPECT_TRUE(w.rope_freq_factors.empty());
  // The release stores output.weight separately, with the embedding's values (tied).
  EXPECT_NE(w.lm_head.data, w.embedding.data);
  EXPECT_TRUE(BytesOf(w.lm_head) == BytesOf(w.embedding));
  // The matrices point into the file, not into copies.
  ASSERT_FALSE(calls.empty());
  EXPECT_EQ(calls.back().first, calls.back().second);
  EXPECT_GT((*m)->weight_bytes(), 260000u * 4);
}

TEST(ModelTest, OpensStories260KHf) {
  BATON_REQUIRE_MODEL_TESTDATA(kStories);
  absl::StatusOr<std::unique_ptr<Model>> m = Model::Open(testing::TestDataPath(kStories) + "/hf");
  ASSERT_TRUE(m.ok()) << m.status();
  const ModelConfig& c = (*m)->config();
  EXPECT_EQ((*m)->format(), "safetensors");
  EXPECT_EQ(c.name, "hf");
  EXPECT_EQ(c.architecture, "LlamaForCausalLM");
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.intermediate_size, 172);
  EXPECT_EQ(c.num_layers, 5);
  EXPECT_EQ(c.num_heads, 8);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.max_position_embeddings, 512);
  EXPECT_EQ(c.rope_layout, RopeLayout::kHalf);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ((*m)->weights().lm_head.data, (*m)->weights().embedding.data);
  EXPECT_THAT((*m)->generation_defaults().eos_token_ids, ::testing::ElementsAre(2));
}

TEST(ModelTest, Stories260KHfAndGgufHoldTheSameWeights) {
  BATON_REQUIRE_MODEL_TESTDATA(kStories);
  auto gguf = Model::Open(testing::TestDataPath(kStories) + "/stories260K.gguf");
  auto hf = Model::Open(testing::TestDataPath(kStories) + "/hf");
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  ASSERT_TRUE(hf.ok()) << hf.status();
  ExpectSameWeights(**hf, **gguf, /*permuted=*/true);
}

// --no-mmap: the weights copied into anonymous memory are the mapped ones, byte for byte,
// in both formats, and no longer point into the file mapping.
TEST(ModelTest, CopiedWeightsEqualMappedWeights) {
  BATON_REQUIRE_MODEL_TESTDATA(kStories);
  for (const std::string sub : {"/stories260K.gguf", "/hf"}) {
    OpenOptions copy;
    copy.use_mmap = false;
    auto mapped = Model::Open(testing::TestDataPath(kStories) + sub);
    auto copied = Model::Open(testing::TestDataPath(kStories) + sub, copy);
    ASSERT_TRUE(mapped.ok()) << mapped.status();
    ASSERT_TRUE(copied.ok()) << copied.status();
    EXPECT_NE((*mapped)->weights().embedding.data, (*copied)->weights().embedding.data);
    ExpectSameWeights(**mapped, **copied, /*permuted=*/false);
  }
}

// ---- synthetic models: writer -> reader round trips ----

struct Written {
  TempDir dir;
  std::unique_ptr<Model> hf, gguf;
};

void WriteAndOpen(const SyntheticModelSpec& spec, Written* out) {
  ASSERT_TRUE(WriteSyntheticModel(spec, out->dir.path()).ok());
  if (spec.write_hf) {
    auto hf = Model::Open(out->dir.path());
    ASSERT_TRUE(hf.ok()) << hf.status();
    out->hf = std::move(*hf);
  }
  if (spec.write_gguf) {
    auto gguf = Model::Open(out->dir / "model.gguf");
    ASSERT_TRUE(gguf.ok()) << gguf.status();
    out->gguf = std::move(*gguf);
  }
}

class SyntheticRoundTrip : public ::testing::TestWithParam<cpu::DType> {};

TEST_P(SyntheticRoundTrip, BothFormatsHoldTheSameWeights) {
  SyntheticModelSpec spec{.config = *SyntheticShape("tiny"), .dtype = GetParam(), .seed = 7};
  Written w;
  ASSERT_NO_FATAL_FAILURE(WriteAndOpen(spec, &w));
  const ModelConfig& h = w.hf->config();
  const ModelConfig& g = w.gguf->config();
  for (const ModelConfig* c : {&h, &g}) {
    EXPECT_EQ(c->vocab_size, 320);
    EXPECT_EQ(c->hidden_size, 64);
    EXPECT_EQ(c->intermediate_size, 160);
    EXPECT_EQ(c->num_layers, 2);
    EXPECT_EQ(c->num_heads, 4);
    EXPECT_EQ(c->num_kv_heads, 2);
    EXPECT_EQ(c->head_dim, 16);
    EXPECT_EQ(c->max_position_embeddings, 512);
    EXPECT_FALSE(c->tie_word_embeddings);
    EXPECT_EQ(c->bos_token_id, kSyntheticEosId);
    EXPECT_THAT(c->eos_token_ids, ::testing::ElementsAre(kSyntheticEosId));
  }
  EXPECT_NEAR(g.rms_norm_eps, h.rms_norm_eps, 1e-12);
  EXPECT_EQ(h.rope_layout, RopeLayout::kHalf);
  EXPECT_EQ(g.rope_layout, RopeLayout::kInterleaved);
  EXPECT_EQ(w.hf->weights().embedding.dtype, GetParam());
  ExpectSameWeights(*w.hf, *w.gguf, /*permuted=*/true);
  EXPECT_EQ(w.hf->weights().layers[1].attn_norm.size(), 64u);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, SyntheticRoundTrip,
                         ::testing::Values(cpu::DType::kF32, cpu::DType::kF16, cpu::DType::kBF16),
                         [](const auto& info) { return std::string(cpu::DTypeName(info.param)); });

TEST(SyntheticModelTest, WeightsHaveTheIntendedScale) {
  Written w;
  ASSERT_NO_FATAL_FAILURE(WriteAndOpen({.config = *SyntheticShape("tiny"),
                                        .dtype = cpu::DType::kF32,
                                        .seed = 3,
                                        .write_gguf = false},
                                       &w));
  const Weights& weights = w.hf->weights();
  for (const cpu::MatrixRef* m :
       {&weights.embedding, &weights.layers[0].q.weight, &weights.layers[1].down.weight}) {
    double sum = 0, sum2 = 0;
    for (int64_t r = 0; r < m->rows; ++r) {
      for (float v : RowOf(*m, r)) {
        sum += v;
        sum2 += v * v;
      }
    }
    const double n = static_cast<double>(m->rows * m->cols);
    EXPECT_NEAR(sum / n, 0.0, 0.02);
    EXPECT_NEAR(sum2 / n * static_cast<double>(m->cols), 1.0, 0.1);  // variance 1/cols
  }
  for (float v : weights.final_norm) EXPECT_TRUE(v >= 0.9f && v <= 1.1f) << v;
  // Rows differ: every row has its own stream.
  EXPECT_NE(RowOf(weights.embedding, 0), RowOf(weights.embedding, 1));
}

TEST(SyntheticModelTest, DeterministicFromTheSeed) {
  // general.name defaults to the directory name; fix it so two directories compare.
  SyntheticModelSpec spec{.config = *SyntheticShape("tiny"), .seed = 11, .name = "det"};
  absl::StatusOr<std::string> a = SyntheticGgufBytes(spec);
  absl::StatusOr<std::string> b = SyntheticGgufBytes(spec);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(*a == *b);
  spec.seed = 12;
  EXPECT_FALSE(*a == *SyntheticGgufBytes(spec));
  TempDir d1, d2;
  spec.seed = 11;
  ASSERT_TRUE(WriteSyntheticModel(spec, d1.path()).ok());
  ASSERT_TRUE(WriteSyntheticModel(spec, d2.path()).ok());
  for (const char* f : {"model.safetensors", "model.gguf", "config.json", "tokenizer.json"}) {
    EXPECT_TRUE(ReadFile(d1 / f) == ReadFile(d2 / f)) << f;
  }
  EXPECT_TRUE(ReadFile(d1 / "model.gguf") == *a);
}

TEST(SyntheticModelTest, Q8GgufDequantizesToTheF32Weights) {
  SyntheticModelSpec spec{
      .config = *SyntheticShape("tiny"), .dtype = cpu::DType::kQ8_0, .seed = 5, .write_hf = false};
  Written q8;
  ASSERT_NO_FATAL_FAILURE(WriteAndOpen(spec, &q8));
  spec.dtype = cpu::DType::kF32;
  Written f32;
  ASSERT_NO_FATAL_FAILURE(WriteAndOpen(spec, &f32));
  const Weights& a = q8.gguf->weights();
  const Weights& b = f32.gguf->weights();
  EXPECT_EQ(a.layers[0].q.weight.dtype, cpu::DType::kQ8_0);
  EXPECT_EQ(a.layers[0].attn_norm, b.layers[0].attn_norm);  // vectors stay f32
  for (const auto& [x, y] : {std::pair{&a.embedding, &b.embedding},
                             std::pair{&a.layers[1].k.weight, &b.layers[1].k.weight},
                             std::pair{&a.layers[0].down.weight, &b.layers[0].down.weight}}) {
    for (int64_t r = 0; r < x->rows; ++r) {
      const std::vector<float> q = RowOf(*x, r), f = RowOf(*y, r);
      for (size_t i = 0; i < q.size(); ++i) {
        // Half a quantization step of a block whose max is at most a = sqrt(3/cols), plus
        // the f16 rounding of the block scale (relative 2^-11 of the block max).
        const double a = std::sqrt(3.0 / static_cast<double>(x->cols));
        EXPECT_NEAR(q[i], f[i], a / 127 * 0.5 + a / 2048 + 1e-7);
      }
    }
  }
  EXPECT_FALSE(WriteSyntheticModel({.config = *SyntheticShape("tiny"), .dtype = cpu::DType::kQ8_0},
                                   TempDir().path())
                   .ok());
}

TEST(SyntheticModelTest, Llama3RopeScalingGoesToRopeFreqsInGguf) {
  ModelConfig c = *SyntheticShape("tiny");
  c.tie_word_embeddings = true;
  c.rope_theta = 500000;
  c.rope_scaling = {.type = RopeScaling::Type::kLlama3,
                    .factor = 32,
                    .low_freq_factor = 1,
                    .high_freq_factor = 4,
                    .original_max_position = 64};
  Written w;
  ASSERT_NO_FATAL_FAILURE(WriteAndOpen({.config = c, .dtype = cpu::DType::kF32}, &w));
  EXPECT_EQ(w.hf->config().rope_scaling.type, RopeScaling::Type::kLlama3);
  EXPECT_TRUE(w.hf->weights().rope_freq_factors.empty());
  EXPECT_EQ(w.gguf->config().rope_scaling.type, RopeScaling::Type::kNone);
  ASSERT_EQ(w.gguf->weights().rope_freq_factors.size(), 8u);
  EXPECT_TRUE(w.gguf->config().tie_word_embeddings);
  EXPECT_EQ(w.gguf->weights().lm_head.data, w.gguf->weights().embedding.data);
  // Both routes give the same frequencies, and scaling did something.
  const std::vector<double> hf = RopeInverseFrequencies(w.hf->config());
  const std::vector<double> gguf =
      RopeInverseFrequencies(w.gguf->config(), w.gguf->weights().rope_freq_factors);
  ModelConfig plain = w.hf->config();
  plain.rope_scaling = {};
  const std::vector<double> base = RopeInverseFrequencies(plain);
  ASSERT_EQ(hf.size(), gguf.size());
  for (size_t i = 0; i < hf.size(); ++i) EXPECT_NEAR(hf[i], gguf[i], hf[i] * 1e-6);
  EXPECT_DOUBLE_EQ(hf[0], base[0]);                 // high frequency: unscaled
  EXPECT_NEAR(hf.back(), base.back() / 32, 1e-15);  // low frequency: divided by the factor
  ExpectSameWeights(*w.hf, *w.gguf, /*permuted=*/true);
}

TEST(SyntheticModelTest, Qwen2HasBiasesAndKeepsTheHfLayoutInGguf) {
  ModelConfig c = *SyntheticShape("tiny");
  c.architecture = "Qwen2ForCausalLM";
  Written w;
  ASSERT_NO_FATAL_FAILURE(WriteAndOpen({.config = c, .dtype = cpu::DType::kBF16}, &w));
  EXPECT_EQ(w.gguf->config().architecture, "qwen2");
  EXPECT_EQ(w.gguf->config().rope_layout, RopeLayout::kHalf);
  EXPECT_TRUE(w.hf->config().attention_bias);
  EXPECT_TRUE(w.gguf->config().attention_bias);
  EXPECT_EQ(w.hf->weights().layers[0].q.bias.size(), 64u);
  EXPECT_EQ(w.hf->weights().layers[0].k.bias.size(), 32u);
  EXPECT_TRUE(w.hf->weights().layers[0].o.bias.empty());
  ExpectSameWeights(*w.hf, *w.gguf, /*permuted=*/false);
}

TEST(SyntheticModelTest, RefusesWhatItCannotWrite) {
  ModelConfig c = *SyntheticShape("tiny");
  c.vocab_size = 100;
  EXPECT_THAT(WriteSyntheticModel({.config = c}, TempDir().path()).message(),
              HasSubstr("below the synthetic tokenizer"));
  c = *SyntheticShape("tiny");
  c.architecture = "GemmaForCausalLM";
  EXPECT_FALSE(WriteSyntheticModel({.config = c}, TempDir().path()).ok());
  EXPECT_THAT(SyntheticShape("gpt5").status().message(), HasSubstr("known: tiny"));
  EXPECT_TRUE(SyntheticShape("smollm2-135m").ok());
  EXPECT_EQ(SyntheticShape("llama3.2-1b")->rope_scaling.type, RopeScaling::Type::kLlama3);
}

// ---- sharded safetensors ----

// Splits the tiny model's model.safetensors into two shards plus an index.
void Shard(const std::string& dir, const std::string& index_override = "") {
  const std::string bytes = ReadFile(dir + "/model.safetensors");
  absl::StatusOr<SafetensorsFile> f = SafetensorsFile::Parse(bytes, "x");
  ASSERT_TRUE(f.ok());
  SafetensorsWriter a, b;
  nlohmann::json map;
  for (const SafetensorsTensor& t : f->tensors()) {
    const bool first = t.name.find("layers.1.") == std::string::npos;
    (first ? a : b).AddTensorBytes(t.name, t.dtype, t.shape, std::string(t.data));
    map[t.name] = first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  ASSERT_TRUE(a.WriteFile(dir + "/model-00001-of-00002.safetensors").ok());
  ASSERT_TRUE(b.WriteFile(dir + "/model-00002-of-00002.safetensors").ok());
  std::filesystem::remove(dir + "/model.safetensors");
  WriteFile(dir + "/model.safetensors.index.json",
            index_override.empty()
                ? nlohmann::json{{"metadata", {{"total_size", 1}}}, {"weight_map", map}}.dump()
                : index_override);
}

TEST(ModelTest, OpensShardedSafetensors) {
  Written w;
  ASSERT_NO_FATAL_FAILURE(WriteAndOpen({.config = *SyntheticShape("tiny"), .seed = 2}, &w));
  ASSERT_NO_FATAL_FAILURE(Shard(w.dir.path()));
  auto sharded = Model::Open(w.dir.path());
  ASSERT_TRUE(sharded.ok()) << sharded.status();
  ExpectSameWeights(**sharded, *w.gguf, /*permuted=*/true);
}

TEST(ModelTest, ShardedIndexErrors) {
  TempDir dir;
  ASSERT_TRUE(
      WriteSyntheticModel({.config = *SyntheticShape("tiny"), .write_gguf = false}, dir.path())
          .ok());
  ASSERT_NO_FATAL_FAILURE(Shard(dir.path()));
  const std::string index = ReadFile(dir / "model.safetensors.index.json");
  auto open_with = [&](const nlohmann::json& j) {
    WriteFile(dir / "model.safetensors.index.json", j.dump());
    return Model::Open(dir.path()).status();
  };
  nlohmann::json j = nlohmann::json::parse(index);
  j["weight_map"]["model.norm.weight"] = "../model-00001-of-00002.safetensors";
  EXPECT_THAT(open_with(j).message(), HasSubstr("not a plain file name"));
  j = nlohmann::json::parse(index);
  j["weight_map"]["model.norm.weight"] = "model-00002-of-00002.safetensors";
  EXPECT_THAT(open_with(j).message(), HasSubstr("which has no such tensor"));
  j = nlohmann::json::parse(index);
  j["weight_map"]["model.norm.weight"] = "model-00003-of-00003.safetensors";
  absl::Status s = open_with(j);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("model-00003-of-00003.safetensors"));
  j = nlohmann::json::parse(index);
  j["weight_map"].erase("model.norm.weight");
  EXPECT_THAT(open_with(j).message(), HasSubstr("tensor 'model.norm.weight' is missing"));
}

// ---- corrupt files: every failure a clean error naming what is wrong ----

class CorruptModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(
        WriteSyntheticModel(
            {.config = *SyntheticShape("tiny"), .dtype = cpu::DType::kF16, .seed = 9}, dir_.path())
            .ok());
    config_ = ReadFile(dir_ / "config.json");
    safetensors_ = ReadFile(dir_ / "model.safetensors");
    gguf_ = ReadFile(dir_ / "model.gguf");
  }

  absl::Status LoadHf(std::string_view config, std::string_view safetensors) {
    HfModelBytes in;
    in.config_json = config;
    in.files.emplace_back("model.safetensors", safetensors);
    in.source = "tiny";
    return LoadHfModel(in).status();
  }

  // Patches the ggml type of tensor `name` in the GGUF header.
  std::string WithGgufType(const std::string& name, uint32_t type) {
    std::string bytes = gguf_;
    const size_t at = bytes.find(name);
    EXPECT_NE(at, std::string::npos);
    size_t p = at + name.size();
    uint32_t n_dims;
    std::memcpy(&n_dims, bytes.data() + p, 4);
    p += 4 + 8 * n_dims;
    std::memcpy(bytes.data() + p, &type, 4);
    return bytes;
  }

  TempDir dir_;
  std::string config_, safetensors_, gguf_;
};

TEST_F(CorruptModelTest, TheIntactFilesLoad) {
  EXPECT_TRUE(LoadHf(config_, safetensors_).ok());
  EXPECT_TRUE(LoadGgufModel(gguf_, "model.gguf").ok());
}

TEST_F(CorruptModelTest, TruncatedSafetensors) {
  const size_t step = safetensors_.size() / 300 + 1;
  for (size_t cut = 0; cut < safetensors_.size(); cut += step) {
    absl::Status s = LoadHf(config_, std::string_view(safetensors_).substr(0, cut));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << cut;
    EXPECT_THAT(s.message(), HasSubstr("model.safetensors")) << cut;
  }
}

TEST_F(CorruptModelTest, TruncatedGguf) {
  // The last tensor may be followed by up to 31 bytes of alignment padding, which a
  // loader does not need.
  const size_t step = gguf_.size() / 300 + 1;
  for (size_t cut = 0; cut + 32 < gguf_.size(); cut += step) {
    absl::Status s = LoadGgufModel(std::string_view(gguf_).substr(0, cut), "model.gguf").status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << cut;
    EXPECT_THAT(s.message(), HasSubstr("model.gguf")) << cut;
  }
}

TEST_F(CorruptModelTest, ConfigDisagreesWithTheWeights) {
  nlohmann::json j = nlohmann::json::parse(config_);
  j["hidden_size"] = 128;
  absl::Status s = LoadHf(j.dump(), safetensors_);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("tensor 'model.embed_tokens.weight' has shape [320, 64], "
                                     "expected [320, 128]"));
  j = nlohmann::json::parse(config_);
  j["num_key_value_heads"] = 4;
  EXPECT_THAT(LoadHf(j.dump(), safetensors_).message(),
              HasSubstr("tensor 'model.layers.0.self_attn.k_proj.weight' has shape [32, 64], "
                        "expected [64, 64]"));
  j = nlohmann::json::parse(config_);
  j["num_hidden_layers"] = 3;
  EXPECT_THAT(LoadHf(j.dump(), safetensors_).message(),
              HasSubstr("tensor 'model.layers.2.input_layernorm.weight' is missing"));
  j = nlohmann::json::parse(config_);
  j["attention_bias"] = true;
  EXPECT_THAT(LoadHf(j.dump(), safetensors_).message(),
              HasSubstr("'model.layers.0.self_attn.q_proj.bias' is missing"));
  j = nlohmann::json::parse(config_);
  j["architectures"] = {"PhiForCausalLM"};
  EXPECT_THAT(LoadHf(j.dump(), safetensors_).message(),
              HasSubstr("unsupported architecture PhiForCausalLM"));
}

TEST_F(CorruptModelTest, UnsupportedGgufTensorType) {
  absl::Status s =
      LoadGgufModel(WithGgufType("blk.0.attn_q.weight", 20), "model.gguf").status();  // iq4_nl
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("tensor 'blk.0.attn_q.weight' has type iq4_nl (20), which is "
                                     "not supported (supported: f32, f16, bf16, q4_0"));
  // An unused tensor of any type is fine: here the only complaint is the missing name.
  std::string renamed = WithGgufType("blk.1.ffn_up.weight", 20);
  renamed.replace(renamed.find("blk.1.ffn_up.weight"), 19, "blk.1.ffn_zz.weight");
  EXPECT_THAT(LoadGgufModel(renamed, "model.gguf").status().message(),
              HasSubstr("tensor 'blk.1.ffn_up.weight' is missing"));
}

TEST_F(CorruptModelTest, OpenRefusesWhatIsNotAModel) {
  EXPECT_EQ(Model::Open(dir_ / "nope").status().code(), absl::StatusCode::kNotFound);
  TempDir empty;
  EXPECT_THAT(Model::Open(empty.path()).status().message(), HasSubstr("has no config.json"));
  EXPECT_THAT(Model::Open(dir_ / "tokenizer.json").status().message(),
              HasSubstr("neither a .gguf file nor a directory"));
  std::filesystem::remove(dir_ / "model.safetensors");
  EXPECT_THAT(Model::Open(dir_.path()).status().message(),
              HasSubstr("model.safetensors' does not exist"));
  // A directory with only a GGUF opens it.
  std::filesystem::remove(dir_ / "config.json");
  auto m = Model::Open(dir_.path());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->format(), "gguf");
}

}  // namespace
}  // namespace baton::model
