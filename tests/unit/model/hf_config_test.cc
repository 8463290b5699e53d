#include "model/hf_config.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace baton::model {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Llama 3.2 1B's config.json, as released.
constexpr const char* kLlama32 = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "head_dim": 64,
  "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
  "intermediate_size": 8192, "max_position_embeddings": 131072, "mlp_bias": false,
  "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 16,
  "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "transformers_version": "4.45.0.dev0", "use_cache": true, "vocab_size": 128256})";

// Qwen2.5 0.5B Instruct's config.json, as released.
constexpr const char* kQwen25 = R"({
  "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
  "eos_token_id": 151645, "hidden_act": "silu", "hidden_size": 896,
  "initializer_range": 0.02, "intermediate_size": 4864, "max_position_embeddings": 32768,
  "max_window_layers": 21, "model_type": "qwen2", "num_attention_heads": 14,
  "num_hidden_layers": 24, "num_key_value_heads": 2, "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": true,
  "torch_dtype": "bfloat16", "transformers_version": "4.43.1", "use_cache": true,
  "use_sliding_window": false, "vocab_size": 151936})";

// Mistral 7B v0.1's config.json, as released.
constexpr const char* kMistral01 = R"({
  "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2,
  "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
  "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mistral",
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.34.0.dev0",
  "use_cache": true, "vocab_size": 32000})";

nlohmann::json Llama() { return nlohmann::json::parse(kLlama32); }

absl::Status StatusOf(const nlohmann::json& j) {
  return ParseHfConfig(j.dump(), "config.json").status();
}

TEST(HfConfigTest, Llama32) {
  absl::StatusOr<ModelConfig> c = ParseHfConfig(kLlama32, "config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "LlamaForCausalLM");
  EXPECT_EQ(c->vocab_size, 128256);
  EXPECT_EQ(c->hidden_size, 2048);
  EXPECT_EQ(c->intermediate_size, 8192);
  EXPECT_EQ(c->num_layers, 16);
  EXPECT_EQ(c->num_heads, 32);
  EXPECT_EQ(c->num_kv_heads, 8);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_DOUBLE_EQ(c->rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c->rope_theta, 500000.0);
  EXPECT_EQ(c->rope_scaling.type, RopeScaling::Type::kLlama3);
  EXPECT_DOUBLE_EQ(c->rope_scaling.factor, 32.0);
  EXPECT_DOUBLE_EQ(c->rope_scaling.low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(c->rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(c->rope_scaling.original_max_position, 8192);
  EXPECT_EQ(c->rope_layout, RopeLayout::kHalf);
  EXPECT_EQ(c->max_position_embeddings, 131072);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_FALSE(c->attention_bias);
  EXPECT_EQ(c->bos_token_id, 128000);
  EXPECT_THAT(c->eos_token_ids, ElementsAre(128001, 128008, 128009));
}

TEST(HfConfigTest, Qwen25HasBiasesAndNoWindow) {
  absl::StatusOr<ModelConfig> c = ParseHfConfig(kQwen25, "config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->attention_bias);
  EXPECT_EQ(c->head_dim, 64);  // 896 / 14
  EXPECT_EQ(c->max_position_embeddings, 32768);
  EXPECT_THAT(c->eos_token_ids, ElementsAre(151645));
  // With use_sliding_window on, the context is clamped to the window.
  nlohmann::json j = nlohmann::json::parse(kQwen25);
  j["use_sliding_window"] = true;
  j["sliding_window"] = 4096;
  EXPECT_EQ(ParseHfConfig(j.dump(), "c")->max_position_embeddings, 4096);
}

TEST(HfConfigTest, MistralSlidingWindowClampsTheContext) {
  absl::StatusOr<ModelConfig> c = ParseHfConfig(kMistral01, "config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->max_position_embeddings, 4096);
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_FALSE(c->tie_word_embeddings);
  nlohmann::json j = nlohmann::json::parse(kMistral01);
  j["sliding_window"] = nullptr;  // Mistral v0.2 onwards
  EXPECT_EQ(ParseHfConfig(j.dump(), "c")->max_position_embeddings, 32768);
}

TEST(HfConfigTest, DefaultsOfTheTransformersClasses) {
  nlohmann::json j = Llama();
  for (const char* key : {"num_key_value_heads", "head_dim", "rms_norm_eps", "rope_theta",
                          "rope_scaling", "max_position_embeddings", "tie_word_embeddings",
                          "attention_bias", "bos_token_id", "eos_token_id", "architectures"}) {
    j.erase(key);
  }
  absl::StatusOr<ModelConfig> c = ParseHfConfig(j.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "LlamaForCausalLM");  // from model_type
  EXPECT_EQ(c->num_kv_heads, 32);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_DOUBLE_EQ(c->rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c->rope_theta, 10000.0);
  EXPECT_EQ(c->rope_scaling.type, RopeScaling::Type::kNone);
  EXPECT_EQ(c->max_position_embeddings, 2048);
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_EQ(c->bos_token_id, -1);
  EXPECT_TRUE(c->eos_token_ids.empty());
}

TEST(HfConfigTest, LinearRopeScaling) {
  nlohmann::json j = Llama();
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 4.0}};
  absl::StatusOr<ModelConfig> c = ParseHfConfig(j.dump(), "c");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rope_scaling.type, RopeScaling::Type::kLinear);
  EXPECT_DOUBLE_EQ(c->rope_scaling.factor, 4.0);
}

TEST(HfConfigTest, RefusesUnsupportedArchitectures) {
  nlohmann::json j = Llama();
  j["architectures"] = {"GPT2LMHeadModel"};
  absl::Status s = StatusOf(j);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("unsupported architecture GPT2LMHeadModel; supported: LlamaForCausalLM, "
                        "MistralForCausalLM, Qwen2ForCausalLM"));
  j.erase("architectures");
  j["model_type"] = "gemma";
  EXPECT_THAT(StatusOf(j).message(), HasSubstr("unsupported architecture gemma"));
  j.erase("model_type");
  EXPECT_THAT(StatusOf(j).message(), HasSubstr("model_type"));
}

TEST(HfConfigTest, ChecksEveryNumber) {
  struct Case {
    const char* key;
    nlohmann::json value;
    const char* message;
  };
  const Case cases[] = {
      {"vocab_size", 0, "vocab_size = 0 is outside"},
      {"vocab_size", -5, "vocab_size = -5 is outside"},
      {"vocab_size", int64_t{1} << 40, "vocab_size"},
      {"vocab_size", "big", "'vocab_size' must be an integer"},
      {"vocab_size", 1.5, "'vocab_size' must be an integer"},
      {"hidden_size", 1 << 20, "hidden_size"},
      {"intermediate_size", 0, "intermediate_size"},
      {"num_hidden_layers", 100000, "num_hidden_layers"},
      {"num_attention_heads", 0, "num_attention_heads"},
      {"num_key_value_heads", 3, "not a multiple of num_key_value_heads (3)"},
      {"num_key_value_heads", 64, "num_key_value_heads = 64 is outside [1, 32]"},
      {"head_dim", 7, "head_dim"},
      {"head_dim", 4096, "head_dim"},
      {"rms_norm_eps", 0, "rms_norm_eps"},
      {"rms_norm_eps", 2, "rms_norm_eps"},
      {"rope_theta", -1, "rope_theta"},
      {"rope_theta", "x", "'rope_theta' must be a number"},
      {"max_position_embeddings", 0, "max_position_embeddings"},
      {"max_position_embeddings", int64_t{1} << 30, "max_position_embeddings"},
      {"tie_word_embeddings", 1, "'tie_word_embeddings' must be true or false"},
      {"bos_token_id", 128256, "bos_token_id = 128256 is outside the vocabulary"},
      {"eos_token_id", nlohmann::json::array({1, 200000}), "eos_token_id = 200000"},
      {"eos_token_id", "x", "'eos_token_id' must hold token ids"},
      {"hidden_act", "gelu", "hidden_act \"gelu\" is not supported"},
      {"mlp_bias", true, "mlp_bias"},
      {"architectures", nlohmann::json::array(), "'architectures' must be"},
  };
  for (const Case& c : cases) {
    nlohmann::json j = Llama();
    j[c.key] = c.value;
    absl::Status s = StatusOf(j);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.key << " = " << c.value;
    EXPECT_THAT(s.message(), HasSubstr(c.message)) << c.key << " = " << c.value;
    EXPECT_THAT(s.message(), HasSubstr("config.json")) << c.key;
  }
  nlohmann::json j = Llama();
  j.erase("head_dim");
  j["hidden_size"] = 2050;
  EXPECT_THAT(StatusOf(j).message(), HasSubstr("not a multiple of num_attention_heads"));
  j = Llama();
  j.erase("vocab_size");
  EXPECT_THAT(StatusOf(j).message(), HasSubstr("'vocab_size' is missing"));
}

TEST(HfConfigTest, RefusesUnsupportedRopeScaling) {
  nlohmann::json j = Llama();
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  EXPECT_THAT(StatusOf(j).message(), HasSubstr("rope_scaling type 'yarn' is not supported"));
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};
  EXPECT_THAT(StatusOf(j).message(), HasSubstr("'low_freq_factor' is missing"));
  j["rope_scaling"] = {{"rope_type", "llama3"},
                       {"factor", 8.0},
                       {"low_freq_factor", 4.0},
                       {"high_freq_factor", 1.0},
                       {"original_max_position_embeddings", 8192}};
  EXPECT_THAT(StatusOf(j).message(), HasSubstr("must exceed low_freq_factor"));
  j["rope_scaling"] = {{"factor", 8.0}};
  EXPECT_THAT(StatusOf(j).message(), HasSubstr("no 'rope_type'"));
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 0}};
  EXPECT_THAT(StatusOf(j).message(), HasSubstr("rope_scaling.factor"));
  j["rope_scaling"] = "llama3";
  EXPECT_THAT(StatusOf(j).message(), HasSubstr("'rope_scaling' must be null or an object"));
}

TEST(HfConfigTest, RefusesNonJson) {
  EXPECT_THAT(ParseHfConfig("{", "c").status().message(), HasSubstr("not valid JSON"));
  EXPECT_THAT(ParseHfConfig("[]", "c").status().message(), HasSubstr("not a JSON object"));
}

TEST(GenerationConfigTest, ReadsTheUsualFields) {
  absl::StatusOr<GenerationDefaults> g = ParseGenerationConfig(
      R"({"bos_token_id": 128000, "do_sample": true, "eos_token_id": [128001, 128009],
          "temperature": 0.6, "top_p": 0.9, "top_k": 20, "repetition_penalty": 1.05})",
      "generation_config.json");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_THAT(g->eos_token_ids, ElementsAre(128001, 128009));
  EXPECT_TRUE(g->do_sample);
  EXPECT_DOUBLE_EQ(g->temperature, 0.6);
  EXPECT_DOUBLE_EQ(g->top_p, 0.9);
  EXPECT_EQ(g->top_k, 20);
  EXPECT_DOUBLE_EQ(g->repetition_penalty, 1.05);

  g = ParseGenerationConfig(R"({"eos_token_id": 2, "temperature": null})", "g");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_THAT(g->eos_token_ids, ElementsAre(2));
  EXPECT_DOUBLE_EQ(g->temperature, 1.0);
}

TEST(GenerationConfigTest, ChecksRanges) {
  EXPECT_THAT(ParseGenerationConfig(R"({"top_p": 0})", "g").status().message(),
              HasSubstr("'top_p' = 0 is outside (0, 1]"));
  EXPECT_THAT(ParseGenerationConfig(R"({"temperature": -1})", "g").status().message(),
              HasSubstr("temperature"));
  EXPECT_THAT(ParseGenerationConfig(R"({"top_k": -1})", "g").status().message(),
              HasSubstr("top_k"));
  EXPECT_THAT(ParseGenerationConfig(R"({"repetition_penalty": 0})", "g").status().message(),
              HasSubstr("repetition_penalty"));
  EXPECT_THAT(ParseGenerationConfig(R"({"do_sample": "yes"})", "g").status().message(),
              HasSubstr("do_sample"));
  EXPECT_THAT(ParseGenerationConfig("7", "g").status().message(), HasSubstr("not a JSON object"));
}

}  // namespace
}  // namespace baton::model
