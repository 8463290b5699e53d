// Exactness against the upstream tokenizers: every .inp/.out pair in the shared test
// data (strings and the ids Hugging Face tokenizers produced, without BOS) must match.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test_data.h"
#include "tokenizer/loader.h"

namespace baton::tokenizer {
namespace {

using testing::TestDataPath;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Case {
  std::string text;
  std::vector<TokenId> ids;
};

std::vector<Case> ReadCases(const std::string& inp, const std::string& out) {
  std::vector<std::string> texts = absl::StrSplit(ReadAll(inp), "\n__ggml_vocab_test__\n");
  std::vector<std::string> lines = absl::StrSplit(ReadAll(out), '\n');
  // Both files end with a separator, which leaves one empty trailing element.
  if (!texts.empty() && texts.back().empty()) texts.pop_back();
  std::vector<Case> cases;
  for (size_t i = 0; i < texts.size() && i < lines.size(); ++i) {
    Case c{texts[i], {}};
    for (absl::string_view id : absl::StrSplit(lines[i], ' ', absl::SkipEmpty())) {
      c.ids.push_back(std::stoi(std::string(id)));
    }
    cases.push_back(std::move(c));
  }
  EXPECT_EQ(cases.size(), texts.size()) << inp << " and " << out << " disagree in length";
  return cases;
}

void ExpectAllCasesMatch(const std::string& tokenizer_path, const std::string& inp) {
  auto files = LoadTokenizerFiles(tokenizer_path);
  ASSERT_TRUE(files.ok()) << files.status();
  const auto& tok = *files->tokenizer;
  const std::vector<Case> cases = ReadCases(inp, inp.substr(0, inp.size() - 4) + ".out");
  ASSERT_FALSE(cases.empty());
  int failures = 0;
  for (const Case& c : cases) {
    auto ids = tok.Encode(c.text, {.add_special_tokens = false});
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(absl::StrJoin(*ids, " "), absl::StrJoin(c.ids, " "))
        << tokenizer_path << " text: '" << c.text << "'";
    failures += *ids != c.ids;
    // Decoding the reference ids gives the text back for these inputs, except where the
    // tokenizer normalizes (SentencePiece collapses nothing here, so check all).
    auto text = tok.Decode(c.ids);
    ASSERT_TRUE(text.ok()) << text.status();
  }
  EXPECT_EQ(failures, 0) << failures << " of " << cases.size() << " cases differ";
}

class GgufVocabTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufVocabTest, MatchesUpstreamIds) {
  const std::string rel = "tokenizers/gguf/ggml-vocab-" + GetParam() + ".gguf";
  BATON_REQUIRE_TESTDATA(rel + ".inp");
  ExpectAllCasesMatch(TestDataPath(rel), TestDataPath(rel + ".inp"));
}

INSTANTIATE_TEST_SUITE_P(AllVocabs, GgufVocabTest,
                         ::testing::Values("llama-spm", "phi-3", "gpt-2", "mpt", "starcoder",
                                           "refact", "falcon", "deepseek-coder", "deepseek-llm"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

TEST(HfTokenizerJsonTest, Llama3MatchesUpstreamIds) {
  BATON_REQUIRE_TESTDATA("tokenizers/hf/llama3/vocab-test.inp");
  ExpectAllCasesMatch(TestDataPath("tokenizers/hf/llama3/tokenizer.json"),
                      TestDataPath("tokenizers/hf/llama3/vocab-test.inp"));
}

TEST(HfTokenizerJsonTest, GgufNeoxLoads) {
  BATON_REQUIRE_TESTDATA("tokenizers/gguf/ggml-vocab-gpt-neox.gguf");
  auto files = LoadTokenizerFiles(TestDataPath("tokenizers/gguf/ggml-vocab-gpt-neox.gguf"));
  ASSERT_TRUE(files.ok()) << files.status();
  auto ids = files->tokenizer->Encode("Hello world", {.add_special_tokens = false});
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(files->tokenizer->Decode(*ids).value(), "Hello world");
}

// stories260K: llama2.c's encoder is the reference (BOS included). Its one by-design
// difference from HF (a literal U+2581 in the input) is excluded.
void ExpectStoriesCases(const std::string& tokenizer_rel) {
  BATON_REQUIRE_TESTDATA("models/stories260K/reference/encode_cases.json");
  BATON_REQUIRE_TESTDATA(tokenizer_rel);
  auto files = LoadTokenizerFiles(TestDataPath(tokenizer_rel));
  ASSERT_TRUE(files.ok()) << files.status();
  for (const char* ref : {"encode_cases.json", "ref_encode_tok512.json"}) {
    const auto j = nlohmann::json::parse(
        ReadAll(TestDataPath(std::string("models/stories260K/reference/") + ref)));
    int checked = 0;
    for (const auto& c : j["cases"]) {
      const std::string text = c["text"].get<std::string>();
      if (text.find("\xE2\x96\x81") != std::string::npos) continue;
      const auto& expected_json =
          c.contains("ids_with_bos") ? c["ids_with_bos"] : c["runc_ids_with_bos"];
      const auto expected = expected_json.get<std::vector<TokenId>>();
      auto ids = files->tokenizer->Encode(text);
      ASSERT_TRUE(ids.ok()) << ids.status();
      EXPECT_EQ(*ids, expected) << tokenizer_rel << " text: '" << text << "'";
      ++checked;
    }
    EXPECT_GT(checked, 3);
  }
}

TEST(StoriesTokenizerTest, HfTokenizerJsonMatchesLlama2c) {
  ExpectStoriesCases("models/stories260K/hf");
}

TEST(StoriesTokenizerTest, GgufMatchesLlama2c) {
  ExpectStoriesCases("models/stories260K/stories260K.gguf");
}

}  // namespace
}  // namespace baton::tokenizer
