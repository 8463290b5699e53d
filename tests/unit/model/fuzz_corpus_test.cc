// The model fuzzers' seed corpora are made by the writers of this library, from the
// micro shapes of tests/fuzz/micro_model.h. This test checks that every committed seed is
// what the writers make today and that it loads, so the fuzzers start from valid models.
// Regenerate after a deliberate writer change with:
//   BATON_REGENERATE_FUZZ_SEEDS=1 build/release/bin/model_fuzz_corpus_test
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <string>

#include "gtest/gtest.h"
#include "model/gguf_loader.h"
#include "model/hf_config.h"
#include "model/hf_loader.h"
#include "model_test_util.h"
#include "modelgen/synthetic_model.h"
#include "tests/fuzz/micro_model.h"

namespace baton::model {
namespace {

using modelgen::SyntheticConfigJson;
using modelgen::SyntheticGgufBytes;
using modelgen::SyntheticModelSpec;
using modelgen::SyntheticSafetensorsBytes;
using modelgen::SyntheticShape;

using testing::MicroConfig;

std::string CorpusDir(const std::string& fuzzer) {
  return std::string(BATON_SOURCE_DIR) + "/tests/fuzz/corpus/" + fuzzer;
}

struct Seed {
  std::string fuzzer, name;
  std::function<absl::StatusOr<std::string>()> make;
};

SyntheticModelSpec Spec(ModelConfig config, cpu::DType dtype) {
  SyntheticModelSpec spec;
  spec.config = std::move(config);
  spec.dtype = dtype;
  spec.seed = 1;
  spec.name = "micro";
  return spec;
}

std::vector<Seed> Seeds() {
  ModelConfig llama3 = MicroConfig();
  llama3.rope_scaling = {.type = RopeScaling::Type::kLlama3,
                         .factor = 8,
                         .low_freq_factor = 1,
                         .high_freq_factor = 4,
                         .original_max_position = 16};
  std::vector<Seed> seeds = {
      {"safetensors", "llama_f32.safetensors",
       [] { return SyntheticSafetensorsBytes(Spec(MicroConfig(), cpu::DType::kF32)); }},
      {"safetensors", "llama_bf16.safetensors",
       [] { return SyntheticSafetensorsBytes(Spec(MicroConfig(), cpu::DType::kBF16)); }},
      {"safetensors", "qwen2_f16.safetensors",
       [] {
         return SyntheticSafetensorsBytes(Spec(MicroConfig("Qwen2ForCausalLM"), cpu::DType::kF16));
       }},
      {"model_gguf", "llama_f32.gguf",
       [] { return SyntheticGgufBytes(Spec(MicroConfig(), cpu::DType::kF32)); }},
      {"model_gguf", "llama_q8_0.gguf",
       [] {
         return SyntheticGgufBytes(
             Spec(MicroConfig("LlamaForCausalLM", /*q8_compatible=*/true), cpu::DType::kQ8_0));
       }},
      {"model_gguf", "llama_q4_0.gguf",
       [] {
         return SyntheticGgufBytes(
             Spec(MicroConfig("LlamaForCausalLM", /*q8_compatible=*/true), cpu::DType::kQ4_0));
       }},
      {"model_gguf", "llama_q4_k.gguf",
       [] { return SyntheticGgufBytes(Spec(testing::KQuantMicroConfig(), cpu::DType::kQ4_K)); }},
      {"model_gguf", "qwen2_bf16.gguf",
       [] { return SyntheticGgufBytes(Spec(MicroConfig("Qwen2ForCausalLM"), cpu::DType::kBF16)); }},
      {"model_gguf", "llama3_rope_f16.gguf",
       [llama3] { return SyntheticGgufBytes(Spec(llama3, cpu::DType::kF16)); }},
      {"hf_config", "micro_llama3.json",
       [llama3] { return SyntheticConfigJson(Spec(llama3, cpu::DType::kBF16)); }},
      {"hf_config", "micro_qwen2.json",
       [] { return SyntheticConfigJson(Spec(MicroConfig("Qwen2ForCausalLM"), cpu::DType::kF32)); }},
      {"hf_config", "generation_config.json",
       []() -> absl::StatusOr<std::string> {
         return std::string(R"({"bos_token_id": 1, "eos_token_id": [2, 3], "do_sample": true,)"
                            R"( "temperature": 0.6, "top_p": 0.9, "top_k": 40})");
       }},
  };
  for (const char* shape : {"smollm2-135m", "llama3.2-1b"}) {
    seeds.push_back({"hf_config", std::string(shape) + ".json", [shape] {
                       return SyntheticConfigJson(Spec(*SyntheticShape(shape), cpu::DType::kBF16));
                     }});
  }
  return seeds;
}

absl::Status Loads(const std::string& fuzzer, const std::string& bytes) {
  if (fuzzer == "model_gguf") return LoadGgufModel(bytes, "seed").status();
  if (fuzzer == "hf_config") {
    if (bytes.find("architectures") == std::string::npos) {
      return ParseGenerationConfig(bytes, "seed").status();
    }
    return ParseHfConfig(bytes, "seed").status();
  }
  // safetensors: the fuzzer binds against each micro config; one must accept the seed.
  absl::Status last;
  for (const std::string& config : testing::MicroConfigJsons()) {
    HfModelBytes in;
    in.config_json = config;
    in.files.emplace_back("model.safetensors", bytes);
    in.source = "seed";
    last = LoadHfModel(in).status();
    if (last.ok()) return last;
  }
  return last;
}

TEST(FuzzCorpusTest, SeedsAreCurrentAndLoad) {
  const bool regenerate = std::getenv("BATON_REGENERATE_FUZZ_SEEDS") != nullptr;
  for (const Seed& seed : Seeds()) {
    absl::StatusOr<std::string> bytes = seed.make();
    ASSERT_TRUE(bytes.ok()) << seed.name << ": " << bytes.status();
    // A K-quant model's rows are 256-value super-blocks, so its seed is ~230 KB.
    const size_t limit = seed.name.find("_k.") != std::string::npos ? 256u << 10 : 16u << 10;
    EXPECT_LT(bytes->size(), limit) << seed.name << ": seeds should stay a few KB";
    const std::string path = CorpusDir(seed.fuzzer) + "/" + seed.name;
    if (regenerate) {
      std::filesystem::create_directories(CorpusDir(seed.fuzzer));
      testing::WriteFile(path, *bytes);
    }
    ASSERT_TRUE(std::filesystem::exists(path)) << path << " is missing; regenerate the seeds";
    EXPECT_TRUE(testing::ReadFile(path) == *bytes)
        << path << " differs from what the writers make now; regenerate the seeds";
    absl::Status s = Loads(seed.fuzzer, *bytes);
    EXPECT_TRUE(s.ok()) << seed.name << ": " << s;
  }
}

}  // namespace
}  // namespace baton::model
