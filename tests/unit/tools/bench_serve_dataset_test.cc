#include "tools/bench_serve_dataset.h"

#include <map>
#include <set>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tokenizer/loader.h"

namespace baton::tools {
namespace {

using ::testing::HasSubstr;

std::shared_ptr<const tokenizer::Tokenizer> TinyTokenizer() {
  auto files = tokenizer::LoadTokenizerFiles(BATON_SOURCE_DIR "/models/baton-tiny");
  EXPECT_TRUE(files.ok()) << files.status();
  return files.ok() ? files->tokenizer : nullptr;
}

TEST(LengthBoundsTest, FloorAndCeilOfTheRatio) {
  EXPECT_EQ(LengthBounds(100, 0.25, 1), std::make_pair(int64_t{75}, int64_t{125}));
  EXPECT_EQ(LengthBounds(10, 0.33, 1), std::make_pair(int64_t{6}, int64_t{14}));
  EXPECT_EQ(LengthBounds(128, 0.0, 1), std::make_pair(int64_t{128}, int64_t{128}));
  EXPECT_EQ(LengthBounds(1, 0.9, 1), std::make_pair(int64_t{1}, int64_t{2}));
}

TEST(DatasetTest, RandomLengthsStayWithinTheRatioAndVary) {
  auto tok = TinyTokenizer();
  ASSERT_NE(tok, nullptr);
  DatasetOptions o{.num_prompts = 200, .input_len = 60, .output_len = 20, .range_ratio = 0.5};
  auto prompts = MakeDataset(o, tok.get());
  ASSERT_TRUE(prompts.ok()) << prompts.status();
  ASSERT_EQ(prompts->size(), 200u);
  std::set<int64_t> inputs, outputs;
  for (const BenchPrompt& p : *prompts) {
    EXPECT_GE(p.prompt_len, 30);
    EXPECT_LE(p.prompt_len, 90);
    EXPECT_GE(p.output_len, 10);
    EXPECT_LE(p.output_len, 30);
    EXPECT_EQ(static_cast<int64_t>(p.token_ids.size()), p.prompt_len);
    EXPECT_EQ(p.prefix_group, -1);
    inputs.insert(p.prompt_len);
    outputs.insert(p.output_len);
  }
  // Uniform over 61 and 21 values: 200 draws reach both ends' neighbourhoods.
  EXPECT_GT(inputs.size(), 40u);
  EXPECT_GT(outputs.size(), 15u);
  EXPECT_LE(*inputs.begin(), 33);
  EXPECT_GE(*inputs.rbegin(), 87);

  o.range_ratio = 0;
  prompts = MakeDataset(o, tok.get());
  ASSERT_TRUE(prompts.ok());
  for (const BenchPrompt& p : *prompts) {
    EXPECT_EQ(p.prompt_len, 60);
    EXPECT_EQ(p.output_len, 20);
  }
}

TEST(DatasetTest, TokenizerGivesExactTokenCounts) {
  auto tok = TinyTokenizer();
  ASSERT_NE(tok, nullptr);
  DatasetOptions o{.num_prompts = 100, .input_len = 100, .range_ratio = 0.9};
  auto prompts = MakeDataset(o, tok.get());
  ASSERT_TRUE(prompts.ok()) << prompts.status();
  int exact = 0;
  for (const BenchPrompt& p : *prompts) {
    ASSERT_EQ(static_cast<int64_t>(p.token_ids.size()), p.prompt_len);
    for (int32_t id : p.token_ids) {
      ASSERT_TRUE(tok->IsValid(id));
      ASSERT_FALSE(tok->IsSpecial(id)) << id;
    }
    EXPECT_EQ(tok->Decode(p.token_ids).value(), p.text);
    const auto encoded = tok->Encode(p.text, {.add_special_tokens = false}).value();
    if (p.text_is_exact) {
      EXPECT_EQ(encoded, p.token_ids);
      ++exact;
    }
  }
  // The round-trip search succeeds for nearly every prompt of a byte-level BPE.
  EXPECT_GE(exact, 95);
}

TEST(DatasetTest, PrefixGroupsShareTheirPrefix) {
  auto tok = TinyTokenizer();
  ASSERT_NE(tok, nullptr);
  DatasetOptions o{.kind = DatasetKind::kPrefix,
                   .num_prompts = 40,
                   .input_len = 20,
                   .output_len = 8,
                   .range_ratio = 0.5,
                   .num_prefixes = 4,
                   .prefix_len = 64};
  auto prompts = MakeDataset(o, tok.get());
  ASSERT_TRUE(prompts.ok()) << prompts.status();
  std::map<int64_t, std::vector<const BenchPrompt*>> groups;
  for (const BenchPrompt& p : *prompts) {
    EXPECT_GE(p.prompt_len, 64 + 10);
    EXPECT_LE(p.prompt_len, 64 + 30);
    EXPECT_EQ(static_cast<int64_t>(p.token_ids.size()), p.prompt_len);
    groups[p.prefix_group].push_back(&p);
  }
  ASSERT_EQ(groups.size(), 4u);
  std::set<std::vector<int32_t>> distinct_prefixes;
  for (const auto& [group, members] : groups) {
    EXPECT_EQ(members.size(), 10u);
    const std::vector<int32_t> prefix(members[0]->token_ids.begin(),
                                      members[0]->token_ids.begin() + 64);
    const std::string prefix_text = tok->Decode(prefix).value();
    distinct_prefixes.insert(prefix);
    std::set<std::vector<int32_t>> suffixes;
    for (const BenchPrompt* p : members) {
      EXPECT_TRUE(std::equal(prefix.begin(), prefix.end(), p->token_ids.begin()));
      EXPECT_TRUE(p->text.starts_with(prefix_text));
      suffixes.emplace(p->token_ids.begin() + 64, p->token_ids.end());
    }
    EXPECT_EQ(suffixes.size(), members.size());  // the suffixes differ
  }
  EXPECT_EQ(distinct_prefixes.size(), 4u);
  // Shuffled: the first ten prompts are not all of one group.
  std::set<int64_t> first_groups;
  for (size_t i = 0; i < 10; ++i) first_groups.insert((*prompts)[i].prefix_group);
  EXPECT_GT(first_groups.size(), 1u);
}

TEST(DatasetTest, SeedReproduces) {
  auto tok = TinyTokenizer();
  ASSERT_NE(tok, nullptr);
  for (DatasetKind kind : {DatasetKind::kRandom, DatasetKind::kPrefix}) {
    DatasetOptions o{.kind = kind,
                     .num_prompts = 20,
                     .seed = 42,
                     .input_len = 30,
                     .range_ratio = 0.3,
                     .num_prefixes = 3,
                     .prefix_len = 16};
    auto a = MakeDataset(o, tok.get()).value();
    auto b = MakeDataset(o, tok.get()).value();
    o.seed = 43;
    auto c = MakeDataset(o, tok.get()).value();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].token_ids, b[i].token_ids);
      EXPECT_EQ(a[i].text, b[i].text);
      EXPECT_EQ(a[i].output_len, b[i].output_len);
    }
    int same = 0;
    for (size_t i = 0; i < a.size(); ++i) same += a[i].token_ids == c[i].token_ids ? 1 : 0;
    EXPECT_EQ(same, 0);
  }
}

TEST(DatasetTest, WithoutATokenizerPromptsAreWords) {
  DatasetOptions o{.kind = DatasetKind::kPrefix,
                   .num_prompts = 12,
                   .input_len = 15,
                   .num_prefixes = 3,
                   .prefix_len = 10};
  auto prompts = MakeDataset(o, nullptr);
  ASSERT_TRUE(prompts.ok()) << prompts.status();
  std::map<int64_t, std::set<std::string>> prefixes;
  for (const BenchPrompt& p : *prompts) {
    EXPECT_TRUE(p.token_ids.empty());
    EXPECT_FALSE(p.text_is_exact);
    const std::vector<std::string> words = absl::StrSplit(p.text, ' ');
    EXPECT_EQ(static_cast<int64_t>(words.size()), p.prompt_len);
    EXPECT_EQ(p.prompt_len, 25);
    std::string prefix;
    for (size_t i = 0; i < 10; ++i) prefix += words[i] + " ";
    prefixes[p.prefix_group].insert(prefix);
  }
  ASSERT_EQ(prefixes.size(), 3u);
  for (const auto& [group, texts] : prefixes) EXPECT_EQ(texts.size(), 1u);
}

TEST(DatasetTest, BadOptionsNameTheFlag) {
  auto error = [](DatasetOptions o) {
    return std::string(MakeDataset(o, nullptr).status().message());
  };
  EXPECT_THAT(error({.num_prompts = 0}), HasSubstr("--num-prompts"));
  EXPECT_THAT(error({.range_ratio = 1.0}), HasSubstr("--random-range-ratio"));
  EXPECT_THAT(error({.input_len = 0}), HasSubstr("--random-input-len"));
  EXPECT_THAT(error({.output_len = 0}), HasSubstr("--random-output-len"));
  EXPECT_THAT(error({.kind = DatasetKind::kPrefix, .num_prefixes = 0}),
              HasSubstr("--num-prefixes"));
  EXPECT_THAT(error({.kind = DatasetKind::kPrefix, .prefix_len = 0}), HasSubstr("--prefix-len"));
  // A prefix dataset may have no suffix at all.
  EXPECT_TRUE(
      MakeDataset({.kind = DatasetKind::kPrefix, .num_prompts = 2, .input_len = 0}, nullptr).ok());
}

}  // namespace
}  // namespace baton::tools
