// Streaming detokenization equals decoding all ids at once, on real vocabularies.
#include "tokenizer/detokenizer.h"

#include <random>
#include <string>
#include <vector>

#include "common/utf8.h"
#include "gtest/gtest.h"
#include "test_data.h"
#include "tests/fuzz/synthetic_vocab.h"
#include "tokenizer/loader.h"

namespace baton::tokenizer {
namespace {

using testing::TestDataPath;

const char* const kTexts[] = {
    "Hello world",
    " leading space, then words",
    "caf\xC3\xA9 na\xC3\xAFve \xE2\x80\x94 \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E "
    "\xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4",
    "emoji \xF0\x9F\xA6\x99\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x92\xBB flags "
    "\xF0\x9F\x87\xAF\xF0\x9F\x87\xB5",
    "  two leading spaces\n\n\tand tabs   ",
    "code: for (int i = 0; i < n; ++i) { x[i] = 0; }",
};

void ExpectStreamingMatches(const std::shared_ptr<const Tokenizer>& tok, const std::string& name) {
  for (bool skip : {true, false}) {
    for (const char* text : kTexts) {
      auto ids = tok->Encode(text).value();
      IncrementalDetokenizer detok(tok, {.skip_special_tokens = skip});
      std::string streamed;
      for (TokenId id : ids) {
        auto chunk = detok.Add(id);
        ASSERT_TRUE(chunk.ok()) << chunk.status();
        ASSERT_TRUE(IsValidUtf8(*chunk)) << name << ": incomplete UTF-8 emitted";
        streamed += *chunk;
      }
      streamed += detok.Finish();
      EXPECT_EQ(streamed, tok->Decode(ids, {.skip_special_tokens = skip}).value())
          << name << ": " << text;
      if (skip) EXPECT_EQ(streamed, text) << name;
    }
  }
}

TEST(DetokenizerTest, Llama3ByteLevel) {
  BATON_REQUIRE_TESTDATA("tokenizers/hf/llama3/tokenizer.json");
  auto files = LoadTokenizerFiles(TestDataPath("tokenizers/hf/llama3/tokenizer.json")).value();
  ExpectStreamingMatches(files.tokenizer, "llama3");
}

TEST(DetokenizerTest, LlamaSentencePieceWithByteFallback) {
  BATON_REQUIRE_TESTDATA("tokenizers/gguf/ggml-vocab-llama-spm.gguf");
  auto files =
      LoadTokenizerFiles(TestDataPath("tokenizers/gguf/ggml-vocab-llama-spm.gguf")).value();
  ExpectStreamingMatches(files.tokenizer, "llama-spm");
}

TEST(DetokenizerTest, MultiByteCharacterIsHeldUntilComplete) {
  auto tok = synthetic::SentencePiece();
  // "é" encodes to <0xC3> <0xA9>: nothing may leave after the first byte.
  auto ids = tok->Encode("\xC3\xA9", {.add_special_tokens = false}).value();
  ASSERT_GE(ids.size(), 2u);
  IncrementalDetokenizer detok(tok);
  std::string out;
  for (size_t i = 0; i + 1 < ids.size(); ++i) out += detok.Add(ids[i]).value();
  EXPECT_EQ(out, "");
  EXPECT_GT(detok.pending_bytes(), 0u);
  EXPECT_EQ(detok.Add(ids.back()).value(), "\xC3\xA9");
  EXPECT_EQ(detok.Finish(), "");
}

TEST(DetokenizerTest, RandomIdsStreamLikeWholeDecode) {
  for (const auto& tok : {synthetic::ByteLevel(), synthetic::SentencePiece()}) {
    std::mt19937 rng(11);
    for (int iter = 0; iter < 300; ++iter) {
      std::vector<TokenId> ids(rng() % 12);
      for (TokenId& id : ids) id = static_cast<TokenId>(rng() % tok->vocab_size());
      IncrementalDetokenizer detok(tok);
      std::string streamed;
      for (TokenId id : ids) streamed += detok.Add(id).value();
      streamed += detok.Finish();
      ASSERT_EQ(streamed, tok->Decode(ids).value());
    }
  }
}

TEST(DetokenizerTest, InvalidIdIsAnErrorAndChangesNothing) {
  auto tok = synthetic::ByteLevel();
  IncrementalDetokenizer detok(tok);
  EXPECT_FALSE(detok.Add(tok->vocab_size() + 5).ok());
  EXPECT_FALSE(detok.Add(-3).ok());
  EXPECT_EQ(detok.pending_bytes(), 0u);
}

}  // namespace
}  // namespace baton::tokenizer
