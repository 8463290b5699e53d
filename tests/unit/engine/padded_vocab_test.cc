// A padded vocabulary: the synthetic "tiny" model has 320 embedding rows and its tokenizer
// 265 tokens (as Qwen2.5's embedding runs past its tokenizer). The engine never emits an
// id the tokenizer lacks, greedy or sampled, in tokens or in logprobs; without the cut
// (a tokenizer-less model) the same requests do draw the padded rows, so the test can fail.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/strings.h"
#include "engine/engine.h"
#include "engine/loaded_model.h"
#include "gtest/gtest.h"
#include "modelgen/synthetic_model.h"

namespace baton::engine {
namespace {

std::string PaddedModel() {
  static const std::string dir = [] {
    const auto out =
        std::filesystem::temp_directory_path() / StrCat("baton_padded_vocab_", ::getpid());
    modelgen::SyntheticModelSpec spec;
    spec.config = *modelgen::SyntheticShape("tiny");
    spec.seed = 3;  // HF and GGUF: the GGUF lists the padding as unused [PADn] tokens
    const absl::Status s = modelgen::WriteSyntheticModel(spec, out.string());
    EXPECT_TRUE(s.ok()) << s;
    return out.string();
  }();
  return dir;
}

struct Drawn {
  int64_t tokens = 0;
  int64_t padded = 0;  // ids past the tokenizer, in tokens or in top logprobs
};

Drawn Serve(const LoadedModel& m, bool detokenize) {
  EngineOptions o;
  o.threads = 1;
  o.kv_cache_bytes = 4 << 20;
  auto engine = Engine::Create(&m, o);
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return {};
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 12; ++i) {
    EngineRequest r;
    r.prompt_ids = {modelgen::kSyntheticEosId, 72, 101, 108, 108, 111};
    r.params.temperature = i % 3 == 0 ? 0.0 : 2.0;
    r.params.seed = 50 + i;
    r.params.max_tokens = 24;
    r.params.ignore_eos = true;
    r.params.logprobs = i % 2 == 0 ? 5 : -1;
    r.detokenize = detokenize;
    auto s = (*engine)->Submit(std::move(r));
    EXPECT_TRUE(s.ok()) << s.status();
    if (s.ok()) streams.push_back(*s);
  }
  Drawn d;
  for (const auto& s : streams) {
    TokenEvent e;
    while (s->Next(&e)) {
      for (const int32_t id : e.token_ids) {
        ++d.tokens;
        d.padded += id >= modelgen::kSyntheticTokenizerSize;
      }
      for (const SampledToken& t : e.logprobs) {
        for (const auto& [id, lp] : t.top_logprobs)
          d.padded += id >= modelgen::kSyntheticTokenizerSize;
      }
      if (e.finished) {
        EXPECT_TRUE(e.status.ok()) << e.status;
      }
    }
  }
  return d;
}

class PaddedVocabTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PaddedVocabTest, NoIdPastTheTokenizerIsEverEmitted) {
  auto m = LoadModel(PaddedModel() + GetParam());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(SampleableVocab(*m), modelgen::kSyntheticTokenizerSize);
  ASSERT_GT(m->model->config().vocab_size, modelgen::kSyntheticTokenizerSize);
  const Drawn cut = Serve(*m, true);
  EXPECT_EQ(cut.tokens, 12 * 24);
  EXPECT_EQ(cut.padded, 0);
  // The same requests with nothing to cut at: the padded rows are drawn.
  m->tokenizer.tokenizer.reset();
  const Drawn uncut = Serve(*m, false);
  std::printf("  %lld tokens drawn, none padded; uncut, %lld of %lld ids were padded rows\n",
              static_cast<long long>(cut.tokens), static_cast<long long>(uncut.padded),
              static_cast<long long>(uncut.tokens));
  EXPECT_GT(uncut.padded, 0) << "the model's padded rows never win: the test proves nothing";
}

INSTANTIATE_TEST_SUITE_P(Formats, PaddedVocabTest, ::testing::Values("", "/model.gguf"),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           return std::string(p.param.empty() ? "hf" : "gguf");
                         });

}  // namespace
}  // namespace baton::engine
