// One Tokenizer serves many threads (the router's request threads share it). Each
// thread's results must equal the single-threaded ones; the tsan preset runs this too.
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "test_data.h"
#include "tests/fuzz/synthetic_vocab.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/loader.h"

namespace baton::tokenizer {
namespace {

std::vector<std::string> Texts() {
  std::vector<std::string> texts;
  for (int i = 0; i < 64; ++i) {
    texts.push_back("request " + std::to_string(i) + ": the world's <|im_start|> caf\xC3\xA9 " +
                    std::string(static_cast<size_t>(i % 7), ' ') +
                    "\xF0\x9F\xA6\x99 x=" + std::to_string(i * 7919));
  }
  return texts;
}

void ExpectThreadsAgree(const std::shared_ptr<const Tokenizer>& tok) {
  const std::vector<std::string> texts = Texts();
  std::vector<std::vector<TokenId>> expected;
  for (const auto& t : texts) expected.push_back(tok->Encode(t).value());
  constexpr int kThreads = 4;
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 5; ++round) {
        for (size_t i = 0; i < texts.size(); ++i) {
          const size_t k = (i + static_cast<size_t>(t) * 13) % texts.size();
          auto ids = tok->Encode(texts[k]);
          if (!ids.ok() || *ids != expected[k]) ++mismatches[t];
          IncrementalDetokenizer detok(tok);
          std::string streamed;
          for (TokenId id : expected[k]) streamed += detok.Add(id).value();
          streamed += detok.Finish();
          if (streamed != tok->Decode(expected[k]).value()) ++mismatches[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

TEST(ConcurrencyTest, SyntheticByteLevel) { ExpectThreadsAgree(synthetic::ByteLevel()); }

TEST(ConcurrencyTest, SyntheticSentencePiece) { ExpectThreadsAgree(synthetic::SentencePiece()); }

TEST(ConcurrencyTest, Llama3) {
  BATON_REQUIRE_TESTDATA("tokenizers/hf/llama3/tokenizer.json");
  auto files = LoadTokenizerFiles(testing::TestDataPath("tokenizers/hf/llama3/tokenizer.json"));
  ASSERT_TRUE(files.ok()) << files.status();
  ExpectThreadsAgree(files->tokenizer);
}

}  // namespace
}  // namespace baton::tokenizer
