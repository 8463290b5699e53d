// Behaviour of the encode/decode pipeline on small vocabularies built in code.
#include "tokenizer/tokenizer.h"

#include <string>
#include <vector>

#include "common/utf8.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/fuzz/synthetic_vocab.h"

namespace baton::tokenizer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Tok(const Tokenizer& t, TokenId id) { return t.vocab().tokens[id]; }

std::vector<std::string> Pieces(const Tokenizer& t, const std::vector<TokenId>& ids) {
  std::vector<std::string> out;
  for (TokenId id : ids) out.push_back(Tok(t, id));
  return out;
}

TEST(TokenizerTest, ByteLevelMergesInRankOrder) {
  auto t = synthetic::ByteLevel();
  auto ids = t->Encode("Hello the world", {.add_special_tokens = false}).value();
  EXPECT_THAT(Pieces(*t, ids), ElementsAre("Hello", "\xC4\xA0the", "\xC4\xA0world"));
  EXPECT_EQ(t->Decode(ids).value(), "Hello the world");
}

TEST(TokenizerTest, SpecialTokensParsedOnlyWhenAsked) {
  auto t = synthetic::ByteLevel();
  const TokenId im_start = t->TokenToId("<|im_start|>");
  auto parsed = t->Encode("<|im_start|>hi", {.add_special_tokens = false}).value();
  EXPECT_EQ(parsed.front(), im_start);
  auto plain =
      t->Encode("<|im_start|>hi", {.add_special_tokens = false, .parse_special = false}).value();
  EXPECT_THAT(plain, ::testing::Not(::testing::Contains(im_start)));
  EXPECT_EQ(t->Decode(plain).value(), "<|im_start|>hi");
}

TEST(TokenizerTest, UserDefinedTokensAreNeverSplitAndStripWhitespace) {
  auto t = synthetic::ByteLevel();
  const TokenId tool = t->TokenToId("<tool>");
  for (bool parse_special : {true, false}) {
    auto ids =
        t->Encode("a  <tool>  b", {.add_special_tokens = false, .parse_special = parse_special})
            .value();
    // lstrip/rstrip absorb the spaces around the token.
    EXPECT_THAT(Pieces(*t, ids), ElementsAre("a", "<tool>", "b")) << parse_special;
    EXPECT_THAT(ids, ::testing::Contains(tool));
  }
}

TEST(TokenizerTest, BosAndEosFollowConfig) {
  auto t = synthetic::SentencePiece();
  auto with = t->Encode("hi").value();
  EXPECT_EQ(with.front(), t->bos_id());
  auto without = t->Encode("hi", {.add_special_tokens = false}).value();
  EXPECT_NE(without.front(), t->bos_id());
  EXPECT_EQ(with.size(), without.size() + 1);
}

TEST(TokenizerTest, SentencePieceDummyPrefixAndByteFallback) {
  auto t = synthetic::SentencePiece();
  auto ids = t->Encode("the world \xC3\xA9", {.add_special_tokens = false}).value();
  // "é" is not in the vocabulary: it falls back to its two UTF-8 bytes.
  EXPECT_THAT(Pieces(*t, ids), ElementsAre("\xE2\x96\x81the", "\xE2\x96\x81world", "\xE2\x96\x81",
                                           "<0xC3>", "<0xA9>"));
  EXPECT_EQ(t->Decode(ids).value(), "the world \xC3\xA9");
}

TEST(TokenizerTest, InvalidUtf8IsReplacedNotRejected) {
  auto t = synthetic::ByteLevel();
  auto ids = t->Encode("ok\xFF", {.add_special_tokens = false});
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(t->Decode(*ids).value(), "ok" + std::string(kReplacementUtf8));
}

TEST(TokenizerTest, InputLimitIsEnforcedWithAClearMessage) {
  Vocab v;
  v.kind = ModelKind::kByteLevelBpe;
  for (int b = 0; b < 256; ++b) synthetic::AddToken(&v, ByteToUnicode(static_cast<uint8_t>(b)));
  v.decoder.byte_level = true;
  auto t = Tokenizer::Create(std::move(v), {.max_input_bytes = 8}).value();
  EXPECT_TRUE(t->Encode("12345678").ok());
  auto too_long = t->Encode("123456789");
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(too_long.status().message()), HasSubstr("max_input_bytes"));
  EXPECT_THAT(std::string(too_long.status().message()), HasSubstr("8"));
}

TEST(TokenizerTest, DecodeRejectsIdsOutsideTheVocabulary) {
  auto t = synthetic::ByteLevel();
  const std::vector<TokenId> bad = {1, t->vocab_size()};
  auto text = t->Decode(bad);
  ASSERT_FALSE(text.ok());
  EXPECT_THAT(std::string(text.status().message()), HasSubstr("outside the vocabulary"));
  const std::vector<TokenId> negative = {-1};
  EXPECT_FALSE(t->Decode(negative).ok());
}

TEST(TokenizerTest, DecodeSkipsSpecialTokensByDefault) {
  auto t = synthetic::ByteLevel();
  auto ids = t->Encode("<|im_start|>hi<|im_end|>", {.add_special_tokens = false}).value();
  EXPECT_EQ(t->Decode(ids).value(), "hi");
  EXPECT_EQ(t->Decode(ids, {.skip_special_tokens = false}).value(), "<|im_start|>hi<|im_end|>");
}

TEST(TokenizerTest, CreateRejectsInconsistentVocab) {
  Vocab v;
  v.tokens = {"a"};
  v.types = {TokenType::kNormal};
  v.bos_id = 5;
  auto t = Tokenizer::Create(std::move(v));
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("BOS id 5"));
}

TEST(TokenizerTest, LongRunsEncodeInReasonableTime) {
  // The merge loop is O(n log n): a 1 MB run of one character must not take minutes.
  auto t = synthetic::ByteLevel();
  const std::string run(1 << 20, 'a');
  auto ids = t->Encode(run, {.add_special_tokens = false});
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(t->Decode(*ids).value(), run);
}

}  // namespace
}  // namespace baton::tokenizer
