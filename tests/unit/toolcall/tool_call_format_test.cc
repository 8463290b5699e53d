#include "toolcall/tool_call_format.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::toolcall {
namespace {

constexpr Format kAll[] = {Format::kHermes,      Format::kLlama3Json, Format::kMistral,
                           Format::kFunctionary, Format::kCommandR,   Format::kDeepSeekR1,
                           Format::kFirefunction};

TEST(FormatNameTest, RoundTripsEveryFormat) {
  for (Format f : kAll) {
    absl::StatusOr<Format> back = FormatByName(FormatName(f));
    ASSERT_TRUE(back.ok()) << FormatName(f);
    EXPECT_EQ(*back, f);
  }
  EXPECT_EQ(FormatName(Format::kLlama3Json), "llama3_json");
  EXPECT_EQ(FormatName(Format::kDeepSeekR1), "deepseek_r1");
}

TEST(FormatNameTest, UnknownNameListsTheKnownOnes) {
  absl::StatusOr<Format> f = FormatByName("qwen25");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(f.status().message()),
            "unknown tool-call parser 'qwen25'; known: hermes, llama3_json, mistral, "
            "functionary, command_r, deepseek_r1, firefunction");
}

TEST(NeedsSpecialTokensTest, MarkersThatAreSpecialTokens) {
  EXPECT_TRUE(NeedsSpecialTokens(Format::kLlama3Json));
  EXPECT_TRUE(NeedsSpecialTokens(Format::kMistral));
  EXPECT_TRUE(NeedsSpecialTokens(Format::kDeepSeekR1));
  EXPECT_TRUE(NeedsSpecialTokens(Format::kFunctionary));
  EXPECT_FALSE(NeedsSpecialTokens(Format::kCommandR));
  EXPECT_FALSE(NeedsSpecialTokens(Format::kFirefunction));
}

TEST(DetectFormatTest, EveryRecordedTemplate) {
  std::filesystem::path dir = std::filesystem::path(BATON_TESTDATA_DIR) / "chat_templates";
  if (!std::filesystem::is_directory(dir)) GTEST_SKIP() << "no templates at " << dir;
  const std::map<std::string, std::optional<Format>> expected = {
      {"CohereForAI-c4ai-command-r-plus-tool_use.jinja", Format::kCommandR},
      {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", Format::kHermes},
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", Format::kHermes},
      {"Qwen-Qwen2.5-7B-Instruct.jinja", Format::kHermes},
      {"Qwen-Qwen3.jinja", Format::kHermes},
      {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", Format::kDeepSeekR1},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", Format::kDeepSeekR1},
      {"fireworks-ai-llama-3-firefunction-v2.jinja", Format::kFirefunction},
      {"google-gemma-2-2b-it.jinja", std::nullopt},
      {"meetkai-functionary-medium-v3.1.jinja", Format::kFunctionary},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", Format::kLlama3Json},
      {"meta-llama-Llama-3.2-3B-Instruct.jinja", Format::kLlama3Json},
      {"meta-llama-Llama-3.3-70B-Instruct.jinja", Format::kLlama3Json},
      {"meta-llama-Meta-Llama-3-8B-Instruct.jinja", std::nullopt},
      {"microsoft-Phi-3.5-mini-instruct.jinja", std::nullopt},
      {"mistralai-Mistral-Nemo-Instruct-2407.jinja", Format::kMistral},
  };
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::string name = entry.path().filename().string();
    auto it = expected.find(name);
    // A template added later must be given an expectation here.
    ASSERT_NE(it, expected.end()) << "no expectation for " << name;
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream source;
    source << in.rdbuf();
    std::optional<Format> got = DetectFormat(source.str());
    EXPECT_EQ(got.has_value(), it->second.has_value()) << name;
    if (got && it->second) {
      EXPECT_EQ(FormatName(*got), FormatName(*it->second)) << name;
    }
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(expected.size()));
}

TEST(DetectFormatTest, PlainTemplateHasNone) {
  EXPECT_EQ(DetectFormat("{% for m in messages %}{{ m.content }}{% endfor %}"), std::nullopt);
  EXPECT_EQ(DetectFormat(""), std::nullopt);
}

}  // namespace
}  // namespace baton::toolcall
