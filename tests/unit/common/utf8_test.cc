#include "common/utf8.h"

#include <random>
#include <string>

#include "gtest/gtest.h"

namespace baton {
namespace {

TEST(Utf8Test, ValidTextIsUnchanged) {
  const std::string text = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\xA6\x99";  // a é € 🦙
  EXPECT_TRUE(IsValidUtf8(text));
  EXPECT_EQ(SanitizeUtf8(text), text);
}

TEST(Utf8Test, MaximalSubpartsBecomeOneReplacementEach) {
  // The Unicode standard's example (U+FFFD per maximal subpart, table 3-8): the bytes
  // 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64 decode to a,FFFD,FFFD,FFFD,b,FFFD,c,FFFD,FFFD,d.
  const std::string in = "\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64";
  const std::string r(kReplacementUtf8);
  EXPECT_EQ(SanitizeUtf8(in), "a" + r + r + r + "b" + r + "c" + r + r + "d");
}

TEST(Utf8Test, OverlongsAndSurrogatesAreInvalid) {
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));
  EXPECT_FALSE(IsValidUtf8("\xE0\x80\xAF"));
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));      // U+D800
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_TRUE(IsValidUtf8("\xF4\x8F\xBF\xBF"));   // U+10FFFF
}

TEST(Utf8Test, StreamingHoldsBackOnlyIncompleteTails) {
  std::string out;
  EXPECT_EQ(AppendSanitizedUtf8Prefix("ab\xF0\x9F", false, &out), 2u);
  EXPECT_EQ(out, "ab");
  out.clear();
  EXPECT_EQ(AppendSanitizedUtf8Prefix("\xF0\x9F", true, &out), 2u);
  EXPECT_EQ(out, std::string(kReplacementUtf8));
}

// Property: any split of any byte string streams to the same text as one sanitize.
TEST(Utf8Test, StreamingEqualsWholeOnRandomBytes) {
  std::mt19937 rng(7);
  const std::string alphabet = "a\x80\xBF\xC2\xC3\xE0\xE1\xED\xEF\xF0\xF4\xF5\xFF";
  for (int iter = 0; iter < 2000; ++iter) {
    std::string bytes;
    const int n = static_cast<int>(rng() % 24);
    for (int i = 0; i < n; ++i) bytes.push_back(alphabet[rng() % alphabet.size()]);
    std::string streamed;
    std::string pending;
    for (char c : bytes) {
      pending.push_back(c);
      std::string chunk;
      pending.erase(0, AppendSanitizedUtf8Prefix(pending, false, &chunk));
      EXPECT_TRUE(IsValidUtf8(chunk));
      streamed += chunk;
    }
    AppendSanitizedUtf8Prefix(pending, true, &streamed);
    ASSERT_EQ(streamed, SanitizeUtf8(bytes));
  }
}

}  // namespace
}  // namespace baton
