// Loading: paths, directories, and corrupt files, each an error that names what is wrong.
#include "tokenizer/loader.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test_data.h"
#include "tokenizer/gguf_vocab.h"
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

// A GGUF holding only a vocabulary: the keys VocabFromGguf needs for `model` ("llama":
// tokens and scores; "gpt2": tokens and no merges).
std::string VocabGguf(std::string_view model, const std::vector<std::string>& tokens) {
  std::string out = "GGUF";
  auto put = [&](auto v) {
    char buf[sizeof(v)];
    std::memcpy(buf, &v, sizeof(v));
    out.append(buf, sizeof(v));
  };
  auto str = [&](std::string_view s) {
    put(uint64_t{s.size()});
    out.append(s);
  };
  auto array = [&](std::string_view key, uint32_t elem_type, size_t n) {
    str(key);
    put(uint32_t{9});  // array
    put(elem_type);
    put(uint64_t{n});
  };
  put(uint32_t{3});  // version
  put(uint64_t{0});  // tensors
  put(uint64_t{3});  // metadata entries
  str("tokenizer.ggml.model");
  put(uint32_t{8});  // string
  str(model);
  array("tokenizer.ggml.tokens", 8, tokens.size());
  for (const std::string& t : tokens) str(t);
  if (model == "llama") {
    array("tokenizer.ggml.scores", 6, tokens.size());  // float32
    for (size_t i = 0; i < tokens.size(); ++i) put(-static_cast<float>(i));
  } else {
    array("tokenizer.ggml.merges", 8, 0);
  }
  return out;
}

absl::Status VocabOf(std::string_view model, const std::vector<std::string>& tokens) {
  const std::string bytes = VocabGguf(model, tokens);
  absl::StatusOr<gguf::File> file = gguf::File::Parse(bytes);
  if (!file.ok()) return file.status();
  return VocabFromGguf(*file, "v.gguf").status();
}

// A flipped byte in a token string would load and then decode to garbage: every real
// vocabulary is valid UTF-8, so a token that is not is refused, by index.
TEST(LoaderTest, GgufTokenThatIsNotUtf8IsRefused) {
  // What real vocabularies hold: SentencePiece byte tokens are ASCII, "\u2581" marks a
  // space, byte-level BPE spells bytes as printable code points ("\u0120" for a space).
  const std::vector<std::string> spm = {"<unk>", "<0x0A>", "\xE2\x96\x81the", "caf\xC3\xA9",
                                        "\xF0\x9F\xA6\x99"};
  EXPECT_TRUE(VocabOf("llama", spm).ok()) << VocabOf("llama", spm);
  const std::vector<std::string> bpe = {"!", "\xC4\xA0the", "\xC3\xA9"};
  EXPECT_TRUE(VocabOf("gpt2", bpe).ok()) << VocabOf("gpt2", bpe);

  for (const std::string& bad : {
           std::string("a\xFF"),         // not a UTF-8 byte
           std::string("caf\xC3"),       // truncated sequence
           std::string("\xC3\x28"),      // bad continuation
           std::string("\xC0\xAF"),      // overlong '/'
           std::string("\xED\xA0\x80"),  // a surrogate
       }) {
    for (const char* model : {"llama", "gpt2"}) {
      std::vector<std::string> tokens = model == std::string("llama") ? spm : bpe;
      tokens.insert(tokens.begin() + 2, bad);
      absl::Status s = VocabOf(model, tokens);
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << model << " " << s;
      EXPECT_THAT(Message(s), HasSubstr("v.gguf: tokenizer.ggml.tokens[2] is not valid UTF-8"))
          << model;
    }
  }
  absl::Status s = VocabOf("llama", {"<unk>", "ab\xFF"});
  EXPECT_THAT(Message(s), HasSubstr("tokenizer.ggml.tokens[1] is not valid UTF-8 (bad sequence "
                                    "at byte 2)"));
}

// Every vocabulary we ship or test with is valid UTF-8, so the check refuses none of them.
TEST(LoaderTest, EveryTestdataGgufVocabLoads) {
  BATON_REQUIRE_TESTDATA("tokenizers/gguf");
  std::vector<std::string> paths = {std::string(BATON_SOURCE_DIR) + "/models/baton-tiny.gguf"};
  for (const char* dir : {"tokenizers/gguf", "quantized", "models/stories260K"}) {
    if (!std::filesystem::exists(TestDataPath(dir))) continue;
    for (const auto& entry : std::filesystem::directory_iterator(TestDataPath(dir))) {
      if (entry.path().extension() == ".gguf") paths.push_back(entry.path().string());
    }
  }
  for (const std::string& path : paths) {
    if (!std::filesystem::exists(path)) continue;
    auto files = LoadTokenizerFiles(path);
    EXPECT_TRUE(files.ok()) << path << ": " << files.status();
  }
  EXPECT_GE(paths.size(), 10u);
}

}  // namespace
}  // namespace baton::tokenizer
