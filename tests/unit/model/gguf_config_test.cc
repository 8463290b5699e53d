#include "model/gguf_config.h"

#include <functional>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "modelgen/gguf_writer.h"

namespace baton::model {
namespace {

using modelgen::GgufWriter;

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Llama-style metadata like llama.cpp writes; `edit` adds or replaces keys before the
// common ones (keys may not repeat, so the edit says which of them to skip).
struct Meta {
  std::string arch = "llama";
  std::function<void(GgufWriter&)> extra = {};
  std::vector<std::string> skip = {};
};

absl::StatusOr<ModelConfig> Config(const Meta& m) {
  GgufWriter w;
  auto add = [&](const std::string& key, auto fn) {
    if (std::find(m.skip.begin(), m.skip.end(), key) == m.skip.end()) fn(key);
  };
  const std::string p = m.arch + ".";
  w.AddString("general.architecture", m.arch);
  w.AddString("general.name", "Tiny Test");
  add(p + "context_length", [&](const std::string& k) { w.AddUint32(k, 4096); });
  add(p + "embedding_length", [&](const std::string& k) { w.AddUint32(k, 512); });
  add(p + "feed_forward_length", [&](const std::string& k) { w.AddUint32(k, 1024); });
  add(p + "block_count", [&](const std::string& k) { w.AddUint32(k, 4); });
  add(p + "attention.head_count", [&](const std::string& k) { w.AddUint32(k, 8); });
  add(p + "attention.head_count_kv", [&](const std::string& k) { w.AddUint32(k, 2); });
  add(p + "attention.layer_norm_rms_epsilon",
      [&](const std::string& k) { w.AddFloat32(k, 1e-5f); });
  add("tokenizer.ggml.tokens",
      [&](const std::string& k) { w.AddStringArray(k, std::vector<std::string>(100, "x")); });
  add("tokenizer.ggml.eos_token_id", [&](const std::string& k) { w.AddUint32(k, 2); });
  add("tokenizer.ggml.bos_token_id", [&](const std::string& k) { w.AddUint32(k, 1); });
  if (m.extra) m.extra(w);
  absl::StatusOr<std::string> bytes = w.WriteString();
  if (!bytes.ok()) return bytes.status();
  static std::string keep;  // the File views these bytes
  keep = *bytes;
  absl::StatusOr<gguf::File> f = gguf::File::Parse(keep);
  if (!f.ok()) return f.status();
  return ConfigFromGguf(*f, "test.gguf");
}

TEST(GgufConfigTest, Llama) {
  absl::StatusOr<ModelConfig> c = Config({});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "llama");
  EXPECT_EQ(c->name, "Tiny Test");
  EXPECT_EQ(c->max_position_embeddings, 4096);
  EXPECT_EQ(c->hidden_size, 512);
  EXPECT_EQ(c->intermediate_size, 1024);
  EXPECT_EQ(c->num_layers, 4);
  EXPECT_EQ(c->num_heads, 8);
  EXPECT_EQ(c->num_kv_heads, 2);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_NEAR(c->rms_norm_eps, 1e-5, 1e-12);
  EXPECT_DOUBLE_EQ(c->rope_theta, 10000.0);  // the default when absent
  EXPECT_EQ(c->rope_layout, RopeLayout::kInterleaved);
  EXPECT_EQ(c->vocab_size, 100);  // from the token list
  EXPECT_EQ(c->bos_token_id, 1);
  EXPECT_THAT(c->eos_token_ids, ElementsAre(2));
  EXPECT_FALSE(c->attention_bias);
}

TEST(GgufConfigTest, Qwen2AndMistral) {
  absl::StatusOr<ModelConfig> c = Config({.arch = "qwen2"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rope_layout, RopeLayout::kHalf);
  EXPECT_TRUE(c->attention_bias);
  c = Config({.arch = "mistral"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rope_layout, RopeLayout::kInterleaved);
}

TEST(GgufConfigTest, OptionalKeys) {
  absl::StatusOr<ModelConfig> c = Config({.extra = [](GgufWriter& w) {
    w.AddUint32("llama.vocab_size", 128);
    w.AddFloat32("llama.rope.freq_base", 500000.0f);
    w.AddUint32("llama.attention.key_length", 32);
    w.AddUint32("llama.rope.dimension_count", 32);
    w.AddString("llama.rope.scaling.type", "linear");
    w.AddFloat32("llama.rope.scaling.factor", 4.0f);
    w.AddUint32("tokenizer.ggml.eot_token_id", 9);
    w.AddUint32("tokenizer.ggml.eom_token_id", 2);  // repeats EOS: listed once
  }});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->vocab_size, 128);
  EXPECT_DOUBLE_EQ(c->rope_theta, 500000.0);
  EXPECT_EQ(c->head_dim, 32);
  EXPECT_EQ(c->rope_scaling.type, RopeScaling::Type::kLinear);
  EXPECT_DOUBLE_EQ(c->rope_scaling.factor, 4.0);
  EXPECT_THAT(c->eos_token_ids, ElementsAre(2, 9));
}

TEST(GgufConfigTest, AbsentTokenIds) {
  absl::StatusOr<ModelConfig> c =
      Config({.extra =
                  [](GgufWriter& w) {
                    w.AddUint32("tokenizer.ggml.eos_token_id", 0xFFFFFFFFu);
                    w.AddInt32("tokenizer.ggml.bos_token_id", -1);
                  },
              .skip = {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.bos_token_id"}});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->bos_token_id, -1);
  EXPECT_TRUE(c->eos_token_ids.empty());
}

TEST(GgufConfigTest, RefusesUnsupportedArchitectures) {
  absl::Status s = Config({.arch = "gpt2"}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("unsupported architecture gpt2; supported: llama, mistral, qwen2"));
}

TEST(GgufConfigTest, NamesTheBadKey) {
  struct Case {
    Meta meta;
    const char* message;
  };
  const Case cases[] = {
      {{.skip = {"llama.context_length"}}, "'llama.context_length' is missing"},
      {{.skip = {"llama.attention.layer_norm_rms_epsilon"}},
       "'llama.attention.layer_norm_rms_epsilon' is missing"},
      {{.extra = [](GgufWriter& w) { w.AddString("llama.block_count", "four"); },
        .skip = {"llama.block_count"}},
       "llama.block_count"},
      {{.extra = [](GgufWriter& w) { w.AddUint32("llama.attention.head_count_kv", 3); },
        .skip = {"llama.attention.head_count_kv"}},
       "num_key_value_heads (3)"},
      {{.extra = [](GgufWriter& w) { w.AddUint32("llama.embedding_length", 500); },
        .skip = {"llama.embedding_length"}},
       "not a multiple of llama.attention.head_count"},
      {{.extra = [](GgufWriter& w) { w.AddUint32("llama.rope.dimension_count", 32); }},
       "partial rotary embeddings are not supported"},
      {{.extra = [](GgufWriter& w) { w.AddUint32("llama.attention.value_length", 32); }},
       "llama.attention.value_length"},
      {{.extra = [](GgufWriter& w) { w.AddString("llama.rope.scaling.type", "yarn"); }},
       "llama.rope.scaling.type 'yarn' is not supported"},
      {{.extra = [](GgufWriter& w) { w.AddString("llama.rope.scaling.type", "linear"); }},
       "'llama.rope.scaling.factor' is missing"},
      {{.extra = [](GgufWriter& w) { w.AddUint32("tokenizer.ggml.eos_token_id", 100); },
        .skip = {"tokenizer.ggml.eos_token_id"}},
       "eos_token_id = 100 is outside the vocabulary"},
      {{.extra = [](GgufWriter& w) { w.AddUint64("llama.block_count", uint64_t{1} << 50); },
        .skip = {"llama.block_count"}},
       "llama.block_count"},
      {{.extra = [](GgufWriter& w) { w.AddFloat32("llama.rope.freq_base", -1.0f); }}, "rope_theta"},
      {{.skip = {"tokenizer.ggml.tokens"}}, "vocabulary size"},
  };
  for (const Case& c : cases) {
    absl::Status s = Config(c.meta).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(s.message(), HasSubstr(c.message));
    EXPECT_THAT(s.message(), HasSubstr("test.gguf")) << c.message;
  }
}

}  // namespace
}  // namespace baton::model
