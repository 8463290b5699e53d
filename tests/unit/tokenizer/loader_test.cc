// Loading: paths, directories, and corrupt files, each an error that names what is wrong.
#include "tokenizer/loader.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test_data.h"
#include "tokenizer/tokenizer_json.h"

namespace baton::tokenizer {
namespace {

using ::testing::HasSubstr;
using testing::TestDataPath;

std::string Message(const absl::Status& s) { return std::string(s.message()); }

absl::Status LoadJsonText(const std::string& text) {
  return VocabFromTokenizerJson(text, nlohmann::json(), "t.json").status();
}

const char kTiny[] = R"({
  "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]},
  "pre_tokenizer": null, "normalizer": null, "decoder": null, "added_tokens": []})";

TEST(LoaderTest, TinyTokenizerJsonLoads) {
  auto vocab = VocabFromTokenizerJson(kTiny, nlohmann::json(), "tiny.json");
  ASSERT_TRUE(vocab.ok()) << vocab.status();
  auto tok = Tokenizer::Create(std::move(*vocab)).value();
  EXPECT_EQ(tok->Encode("ab").value(), std::vector<TokenId>{2});
}

TEST(LoaderTest, MergesInBothForms) {
  std::string arrays = kTiny;
  arrays.replace(arrays.find(R"(["a b"])"), 7, R"([["a", "b"]])");
  auto vocab = VocabFromTokenizerJson(arrays, nlohmann::json(), "tiny.json");
  ASSERT_TRUE(vocab.ok()) << vocab.status();
  EXPECT_EQ(Tokenizer::Create(std::move(*vocab)).value()->Encode("ab").value(),
            std::vector<TokenId>{2});
}

TEST(LoaderTest, CorruptJsonNamesTheProblem) {
  EXPECT_THAT(Message(LoadJsonText("{")), HasSubstr("not valid JSON"));
  EXPECT_THAT(Message(LoadJsonText("[]")), HasSubstr("top level must be a JSON object"));
  EXPECT_THAT(Message(LoadJsonText("{}")), HasSubstr("missing object 'model'"));
  EXPECT_THAT(Message(LoadJsonText(R"({"model": {"type": "WordPiece", "vocab": {}}})")),
              HasSubstr("model type 'WordPiece' is not supported"));
  EXPECT_THAT(Message(LoadJsonText(R"({"model": {"type": "BPE", "vocab": {"a": -4}}})")),
              HasSubstr("model.vocab['a'] = -4"));
  EXPECT_THAT(Message(LoadJsonText(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 0}}})")),
              HasSubstr("gives id 0 to two tokens"));
  EXPECT_THAT(
      Message(LoadJsonText(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a z"]}})")),
      HasSubstr("model.merges[0]"));
  EXPECT_THAT(Message(LoadJsonText(R"({"model": {"type": "BPE", "vocab": {"a": 0}},
                                       "pre_tokenizer": {"type": "BertPreTokenizer"}})")),
              HasSubstr("unsupported pre_tokenizer type 'BertPreTokenizer'"));
  EXPECT_THAT(Message(LoadJsonText(R"({"model": {"type": "BPE", "vocab": {"a": 0}},
                                       "pre_tokenizer": {"type": "Split", "behavior": "Isolated",
                                       "pattern": {"Regex": "[z-a]"}}})")),
              HasSubstr("invalid pre-tokenizer regex"));
}

TEST(LoaderTest, TruncatedRealFileIsAnErrorAtEveryCut) {
  BATON_REQUIRE_TESTDATA("models/stories260K/hf/tokenizer.json");
  std::ifstream in(TestDataPath("models/stories260K/hf/tokenizer.json"));
  const std::string full((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (size_t cut = 0; cut < full.size(); cut += 97) {
    EXPECT_FALSE(LoadJsonText(full.substr(0, cut)).ok()) << cut;
  }
  EXPECT_TRUE(LoadJsonText(full).ok());
}

TEST(LoaderTest, PathsAndDirectories) {
  auto missing = LoadTokenizerFiles("/nonexistent/tokenizer.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(Message(missing.status()), HasSubstr("does not exist"));

  const auto dir = std::filesystem::temp_directory_path() / "baton_loader_test_empty";
  std::filesystem::create_directories(dir);
  auto empty = LoadTokenizerFiles(dir.string());
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(Message(empty.status()), HasSubstr("no tokenizer.json"));
}

TEST(LoaderTest, ModelDirectoryReadsTokenizerConfig) {
  BATON_REQUIRE_TESTDATA("models/stories260K/hf/tokenizer_config.json");
  auto files = LoadTokenizerFiles(TestDataPath("models/stories260K/hf"));
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(files->config["bos_token"], "<s>");
  EXPECT_EQ(files->tokenizer->Encode("").value(), std::vector<TokenId>{1});  // add_bos_token
}

TEST(LoaderTest, GgufCarriesChatTemplateAndSpecialTokens) {
  BATON_REQUIRE_TESTDATA("tokenizers/gguf/ggml-vocab-phi-3.gguf");
  auto files = LoadTokenizerFiles(TestDataPath("tokenizers/gguf/ggml-vocab-phi-3.gguf"));
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_TRUE(files->config.contains("chat_template"));
  EXPECT_EQ(files->config["bos_token"], "<s>");
  // <|end|> is a control token: matched whole when special parsing is on.
  auto ids = files->tokenizer->Encode("hi<|end|>", {.add_special_tokens = false}).value();
  EXPECT_EQ(ids.back(), files->tokenizer->TokenToId("<|end|>"));
}

TEST(LoaderTest, CorruptGgufVocabIsAnError) {
  BATON_REQUIRE_TESTDATA("tokenizers/gguf/ggml-vocab-gpt-2.gguf");
  std::ifstream in(TestDataPath("tokenizers/gguf/ggml-vocab-gpt-2.gguf"), std::ios::binary);
  const std::string full((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto path = std::filesystem::temp_directory_path() / "baton_truncated.gguf";
  for (size_t cut : {size_t{3}, size_t{24}, full.size() / 2, full.size() - 1}) {
    std::ofstream(path, std::ios::binary) << full.substr(0, cut);
    auto files = LoadTokenizerFiles(path.string());
    EXPECT_FALSE(files.ok()) << "cut at " << cut;
  }
}

}  // namespace
}  // namespace baton::tokenizer
