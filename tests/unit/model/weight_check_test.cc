// Corrupted model files: what loading refuses (tensors sharing bytes), and what only the
// opt-in CheckWeightsFinite finds (a NaN or Inf among the weights).
#include "model/weight_check.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>

#include "common/gguf_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/quant_blocks.h"
#include "model/float_convert.h"
#include "model/gguf_loader.h"
#include "model/hf_loader.h"
#include "model_test_util.h"
#include "modelgen/synthetic_model.h"

namespace baton::model {
namespace {

using modelgen::SyntheticGgufBytes;
using modelgen::SyntheticModelSpec;
using ::testing::HasSubstr;
using testing::MicroConfig;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

SyntheticModelSpec Spec(cpu::DType dtype) {
  SyntheticModelSpec spec;
  // Quantized types need in-features that are whole blocks (32 values, or 256 for the
  // K-quants).
  const int block = cpu::LayoutOf(dtype).elems;
  spec.config = block == 256 ? testing::KQuantMicroConfig()
                             : MicroConfig("LlamaForCausalLM", /*q8_compatible=*/block == 32);
  spec.dtype = dtype;
  spec.seed = 1;
  spec.name = "micro";
  return spec;
}

std::string MicroGguf(cpu::DType dtype) {
  absl::StatusOr<std::string> bytes = SyntheticGgufBytes(Spec(dtype));
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : std::string();
}

// Where tensor `name`'s data starts in the GGUF `bytes`.
size_t TensorStart(const std::string& bytes, std::string_view name) {
  absl::StatusOr<gguf::File> file = gguf::File::Parse(bytes);
  EXPECT_TRUE(file.ok()) << file.status();
  const gguf::TensorInfo* t = file->FindTensor(name);
  EXPECT_NE(t, nullptr) << name;
  return file->data_offset() + t->offset;
}

// Overwrites element `index` of tensor `name`, stored as `dtype` (for a quantized type:
// the first f16 scale of block `index`), with `value`.
void Poison(std::string* bytes, std::string_view name, cpu::DType dtype, size_t index,
            float value) {
  char* p = bytes->data() + TensorStart(*bytes, name);
  if (dtype == cpu::DType::kF32) {
    std::memcpy(p + 4 * index, &value, 4);
    return;
  }
  const uint16_t h = dtype == cpu::DType::kBF16 ? F32ToBf16(value) : F32ToF16(value);
  const cpu::BlockLayout layout = cpu::LayoutOf(dtype);
  if (cpu::IsBlockQuantized(dtype)) p += layout.scale_offsets[0];
  std::memcpy(p + (cpu::IsBlockQuantized(dtype) ? layout.bytes : 2) * index, &h, 2);
}

absl::Status CheckGguf(const std::string& bytes) {
  absl::StatusOr<ModelParts> parts = LoadGgufModel(bytes, "m.gguf");
  if (!parts.ok()) return parts.status();
  return CheckWeightsFinite(parts->weights, TensorNaming::kGguf);
}

TEST(WeightCheckTest, FiniteWeightsPass) {
  for (cpu::DType dtype :
       {cpu::DType::kF32, cpu::DType::kF16, cpu::DType::kBF16, cpu::DType::kQ8_0, cpu::DType::kQ4_0,
        cpu::DType::kQ5_1, cpu::DType::kQ2_K, cpu::DType::kQ4_K, cpu::DType::kQ6_K}) {
    EXPECT_TRUE(CheckGguf(MicroGguf(dtype)).ok()) << cpu::DTypeName(dtype);
  }
  // The largest finite values and the smallest subnormals are finite too.
  std::string bytes = MicroGguf(cpu::DType::kF32);
  Poison(&bytes, "blk.0.attn_q.weight", cpu::DType::kF32, 0, std::numeric_limits<float>::max());
  Poison(&bytes, "blk.0.attn_q.weight", cpu::DType::kF32, 1, -std::numeric_limits<float>::max());
  Poison(&bytes, "blk.0.attn_q.weight", cpu::DType::kF32, 2,
         std::numeric_limits<float>::denorm_min());
  EXPECT_TRUE(CheckGguf(bytes).ok()) << CheckGguf(bytes);
}

TEST(WeightCheckTest, ShippedModelsPass) {
  for (const std::string& path : {std::string(BATON_SOURCE_DIR) + "/models/baton-tiny.gguf",
                                  std::string(BATON_SOURCE_DIR) + "/models/baton-tiny",
                                  testing::TestDataPath("models/stories260K/stories260K.gguf")}) {
    if (!std::filesystem::exists(path)) continue;
    absl::StatusOr<std::unique_ptr<Model>> model = Model::Open(path);
    ASSERT_TRUE(model.ok()) << model.status();
    EXPECT_TRUE(CheckWeightsFinite(**model).ok()) << CheckWeightsFinite(**model);
  }
}

TEST(WeightCheckTest, NamesTheTensorAndElement) {
  struct Case {
    cpu::DType dtype;
    const char* tensor;
    size_t index;
    float value;
    const char* message;
  };
  // Micro shapes: hidden 8, k/v [4, 8], MLP [16, 8] and [8, 16]; q8_0: hidden 32, one
  // 32-value block per row.
  const Case cases[] = {
      {cpu::DType::kF32, "blk.0.attn_v.weight", 13, -kInf,
       "tensor 'blk.0.attn_v.weight' (f32, [4, 8]) holds -Inf at element 13 (row 1, "
       "column 5)"},
      {cpu::DType::kF16, "blk.0.attn_k.weight", 5, kNaN,
       "tensor 'blk.0.attn_k.weight' (f16, [4, 8]) holds NaN at element 5 (row 0, column 5)"},
      {cpu::DType::kBF16, "blk.0.ffn_down.weight", 127, kInf,
       "tensor 'blk.0.ffn_down.weight' (bf16, [8, 16]) holds +Inf at element 127 (row 7, column "
       "15)"},
      {cpu::DType::kQ8_0, "blk.0.ffn_up.weight", 1, kNaN,
       "tensor 'blk.0.ffn_up.weight' (q8_0, [32, 32]) holds NaN as a scale of the block of "
       "elements 32-63 (row 1, columns 0-31)"},
      {cpu::DType::kQ4_1, "blk.0.attn_q.weight", 2, kInf,
       "tensor 'blk.0.attn_q.weight' (q4_1, [32, 32]) holds +Inf as a scale of the block of "
       "elements 64-95 (row 2, columns 0-31)"},
      {cpu::DType::kQ4_K, "blk.0.ffn_up.weight", 3, kNaN,
       "tensor 'blk.0.ffn_up.weight' (q4_K, [256, 256]) holds NaN as a scale of the block of "
       "elements 768-1023 (row 3, columns 0-255)"},
      {cpu::DType::kQ6_K, "blk.0.attn_k.weight", 1, -kInf,
       "tensor 'blk.0.attn_k.weight' (q6_K, [128, 256]) holds -Inf as a scale of the block of "
       "elements 256-511 (row 1, columns 0-255)"},
      // Vectors are widened to f32 at load, and a NaN stays one.
      {cpu::DType::kF32, "blk.0.ffn_norm.weight", 3, kNaN,
       "tensor 'blk.0.ffn_norm.weight' ([8]) holds NaN at element 3"},
      {cpu::DType::kF32, "output_norm.weight", 0, kInf,
       "tensor 'output_norm.weight' ([8]) holds +Inf at element 0"},
  };
  for (const Case& c : cases) {
    std::string bytes = MicroGguf(c.dtype);
    // The loader keeps vectors f32 in the synthetic files whatever the matrices' type.
    const bool vector = std::string_view(c.tensor).find("norm") != std::string_view::npos;
    Poison(&bytes, c.tensor, vector ? cpu::DType::kF32 : c.dtype, c.index, c.value);
    absl::Status s = CheckGguf(bytes);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.tensor << ": " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.message));
  }
}

TEST(WeightCheckTest, ReportsTheFirstTensorInModelOrder) {
  std::string bytes = MicroGguf(cpu::DType::kF16);
  Poison(&bytes, "blk.0.ffn_gate.weight", cpu::DType::kF16, 0, kNaN);
  Poison(&bytes, "token_embd.weight", cpu::DType::kF16, 100, kNaN);
  EXPECT_THAT(CheckGguf(bytes).message(),
              HasSubstr("tensor 'token_embd.weight' (f16, [16, 8]) holds NaN at element 100"));
}

TEST(WeightCheckTest, ModelOverloadNamesTheFileAndHfTensors) {
  testing::TempDir dir;
  std::string gguf = MicroGguf(cpu::DType::kBF16);
  Poison(&gguf, "blk.0.attn_output.weight", cpu::DType::kBF16, 9, kNaN);
  testing::WriteFile(dir / "m.gguf", gguf);
  absl::StatusOr<std::unique_ptr<Model>> model = Model::Open(dir / "m.gguf");
  ASSERT_TRUE(model.ok()) << model.status();  // loading does not read the values
  EXPECT_THAT(
      CheckWeightsFinite(**model).message(),
      HasSubstr((dir / "m.gguf") +
                ": tensor 'blk.0.attn_output.weight' (bf16, [8, 8]) holds NaN at element 9"));

  // A Hugging Face model is named by its safetensors names.
  SyntheticModelSpec spec = Spec(cpu::DType::kBF16);
  const std::string config = *modelgen::SyntheticConfigJson(spec);
  std::string safetensors = *modelgen::SyntheticSafetensorsBytes(spec);
  HfModelBytes in;
  in.config_json = config;
  in.files.emplace_back("model.safetensors", safetensors);
  in.source = "hf";
  absl::StatusOr<ModelParts> parts = LoadHfModel(in);
  ASSERT_TRUE(parts.ok()) << parts.status();
  EXPECT_TRUE(CheckWeightsFinite(parts->weights, TensorNaming::kHf).ok());
  // The matrices point into `safetensors`, which this test owns.
  const cpu::MatrixRef& up = parts->weights.layers[0].up.weight;
  const uint16_t nan = F32ToBf16(kNaN);
  std::memcpy(safetensors.data() + (static_cast<const char*>(up.data) - safetensors.data()) + 2,
              &nan, 2);
  EXPECT_THAT(CheckWeightsFinite(parts->weights, TensorNaming::kHf).message(),
              HasSubstr("tensor 'model.layers.0.mlp.up_proj.weight' (bf16, [16, 8]) holds NaN "
                        "at element 1"));
}

// The corruption that used to load: a tensor's type id changed to a wider type, so that
// its size (computed from the type) still matches its shape, but its data now runs over
// the next tensor's. Refused by the GGUF reader, naming both tensors.
TEST(CorruptGgufTest, WidenedTensorTypeIsRefused) {
  std::string bytes = MicroGguf(cpu::DType::kF16);
  ASSERT_TRUE(LoadGgufModel(bytes, "m.gguf").ok());
  // Tensor infos: name (u64 length, bytes), n_dims (u32), dims (u64 each), type (u32).
  const std::string name = "blk.0.attn_q.weight";
  std::string key(8, '\0');
  const uint64_t len = name.size();
  std::memcpy(key.data(), &len, 8);
  key += name;
  const size_t at = bytes.find(key);
  ASSERT_NE(at, std::string::npos);
  uint32_t n_dims;
  std::memcpy(&n_dims, bytes.data() + at + key.size(), 4);
  char* type = bytes.data() + at + key.size() + 4 + 8 * n_dims;
  uint32_t f16;
  std::memcpy(&f16, type, 4);
  ASSERT_EQ(f16, 1u);
  const uint32_t f32 = 0;
  std::memcpy(type, &f32, 4);

  absl::Status s = LoadGgufModel(bytes, "m.gguf").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  // attn_k follows attn_q in the file; the message gives both byte ranges.
  EXPECT_THAT(std::string(s.message()),
              ::testing::MatchesRegex(".*tensor #3 \\('blk.0.attn_k.weight'\\): data \\[[0-9]+, "
                                      "\\+64\\) overlaps tensor #2 \\('blk.0.attn_q.weight'\\) "
                                      "data \\[[0-9]+, \\+256\\)"));
}

}  // namespace
}  // namespace baton::model
