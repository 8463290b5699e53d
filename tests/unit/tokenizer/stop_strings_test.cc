// Stop strings over streamed text: the result never depends on how the text was split,
// and no byte of a stop string (unless asked) or after it ever reaches the output.
#include "tokenizer/stop_strings.h"

#include <string>
#include <vector>

#include "common/utf8.h"
#include "gtest/gtest.h"

namespace baton::tokenizer {
namespace {

struct Outcome {
  std::string text;
  bool stopped = false;
  std::string matched;
};

// The whole text at once: the stop that completes first (earliest end, then earliest start).
Outcome Reference(const std::vector<std::string>& stops, bool include, const std::string& text) {
  for (size_t end = 1; end <= text.size(); ++end) {
    const std::string* best = nullptr;
    for (const std::string& s : stops) {
      if (s.empty() || s.size() > end || text.compare(end - s.size(), s.size(), s) != 0) continue;
      if (best == nullptr || s.size() > best->size()) best = &s;
    }
    if (best != nullptr) return {text.substr(0, include ? end : end - best->size()), true, *best};
  }
  return {text, false, ""};
}

// Streams `pieces` and checks the invariants after every delta.
Outcome Stream(const std::vector<std::string>& stops, bool include,
               const std::vector<std::string>& pieces, const std::string& final_text) {
  StopStringMatcher matcher(stops, include);
  Outcome out;
  for (const std::string& piece : pieces) {
    StopStringMatcher::Result r = matcher.Add(piece);
    if (out.stopped) {
      EXPECT_TRUE(r.emit.empty()) << "emitted after the stop";
      EXPECT_TRUE(r.stopped);
    }
    out.text += r.emit;
    EXPECT_EQ(final_text.compare(0, out.text.size(), out.text), 0)
        << "emitted '" << out.text << "', which is not a prefix of '" << final_text << "'";
    if (r.stopped && !out.stopped) {
      out.stopped = true;
      out.matched = r.matched;
    }
  }
  out.text += matcher.Flush();
  return out;
}

// Every split of `text` into up to four deltas (empty deltas included).
void ExpectAllSplits(const std::vector<std::string>& stops, const std::string& text) {
  for (bool include : {false, true}) {
    Outcome want = Reference(stops, include, text);
    const size_t n = text.size();
    for (size_t a = 0; a <= n; ++a) {
      for (size_t b = a; b <= n; ++b) {
        for (size_t c = b; c <= n; ++c) {
          std::vector<std::string> pieces = {text.substr(0, a), text.substr(a, b - a),
                                             text.substr(b, c - b), text.substr(c)};
          Outcome got = Stream(stops, include, pieces, want.text);
          ASSERT_EQ(got.text, want.text) << "'" << text << "' split at " << a << "," << b << ","
                                         << c << " include=" << include;
          ASSERT_EQ(got.stopped, want.stopped);
          ASSERT_EQ(got.matched, want.matched);
        }
      }
    }
  }
}

TEST(StopStringsTest, NoStopsPassesTextThrough) {
  StopStringMatcher matcher({}, false);
  EXPECT_EQ(matcher.Add("hello").emit, "hello");
  EXPECT_EQ(matcher.Add(" world").emit, " world");
  EXPECT_EQ(matcher.Flush(), "");
  StopStringMatcher empty_only({""}, false);
  EXPECT_EQ(empty_only.Add("x").emit, "x");
}

TEST(StopStringsTest, StopSplitOverDeltasIsHeldBackThenDropped) {
  StopStringMatcher matcher({"STOP"}, false);
  auto r = matcher.Add("Hel");
  EXPECT_EQ(r.emit, "Hel");
  r = matcher.Add("lo ST");
  EXPECT_EQ(r.emit, "lo ");
  EXPECT_EQ(matcher.held_bytes(), 2u);
  r = matcher.Add("O");
  EXPECT_EQ(r.emit, "");
  EXPECT_FALSE(r.stopped);
  r = matcher.Add("P and more");
  EXPECT_EQ(r.emit, "");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.matched, "STOP");
  r = matcher.Add("after");
  EXPECT_EQ(r.emit, "");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(matcher.Flush(), "");
}

TEST(StopStringsTest, FalseStartIsReleased) {
  StopStringMatcher matcher({"abc"}, false);
  EXPECT_EQ(matcher.Add("xab").emit, "x");
  EXPECT_EQ(matcher.Add("ab").emit, "ab");  // "abab": only the last "ab" can still start it
  EXPECT_EQ(matcher.Add("d").emit, "abd");
  EXPECT_EQ(matcher.held_bytes(), 0u);
}

TEST(StopStringsTest, IncludeStopInOutput) {
  StopStringMatcher matcher({"STOP"}, true);
  EXPECT_EQ(matcher.Add("Hello ST").emit, "Hello ");
  auto r = matcher.Add("OP world");
  EXPECT_EQ(r.emit, "STOP");
  EXPECT_TRUE(r.stopped);
}

TEST(StopStringsTest, FirstStopToCompleteWins) {
  // "ab" completes before "abc" could.
  StopStringMatcher overlapping({"abc", "ab"}, false);
  auto r = overlapping.Add("xabc");
  EXPECT_EQ(r.emit, "x");
  EXPECT_EQ(r.matched, "ab");
  // "lo" ends before "world" does.
  StopStringMatcher two({"world", "lo"}, false);
  r = two.Add("hello world");
  EXPECT_EQ(r.emit, "hel");
  EXPECT_EQ(r.matched, "lo");
  // A later-starting stop that ends first wins, so streaming byte by byte agrees.
  StopStringMatcher inner({"abcd", "b"}, false);
  r = inner.Add("abcd");
  EXPECT_EQ(r.emit, "a");
  EXPECT_EQ(r.matched, "b");
  // Same end: the earlier start (the longer stop).
  StopStringMatcher same_end({"bc", "abc"}, true);
  r = same_end.Add("zabc!");
  EXPECT_EQ(r.emit, "zabc");
  EXPECT_EQ(r.matched, "abc");
}

TEST(StopStringsTest, FlushReturnsTheHeldTail) {
  StopStringMatcher matcher({"END", "\n\n"}, false);
  EXPECT_EQ(matcher.Add("the EN").emit, "the ");
  EXPECT_EQ(matcher.Flush(), "EN");
  EXPECT_EQ(matcher.Flush(), "");
  StopStringMatcher newline({"\n\n"}, false);
  EXPECT_EQ(newline.Add("line\n").emit, "line");
  EXPECT_EQ(newline.Flush(), "\n");
}

TEST(StopStringsTest, MultibyteUtf8) {
  const std::string nihon = "\xE6\x97\xA5\xE6\x9C\xAC";  // 日本
  const std::string nichi = "\xE6\x97\xA5";              // 日
  const std::string you = "\xE6\x9B\x9C";                // 曜
  StopStringMatcher matcher({nihon, "\xE2\x80\x94"}, false);
  std::string emitted;
  // 日曜日本語, one character per delta: the first 日 is held, then released by 曜.
  for (const std::string& c :
       {nichi, you, nichi, std::string("\xE6\x9C\xAC"), std::string("\xE8\xAA\x9E")}) {
    auto r = matcher.Add(c);
    EXPECT_TRUE(IsValidUtf8(r.emit));
    emitted += r.emit;
    if (r.stopped) {
      EXPECT_EQ(r.matched, nihon);
      break;
    }
  }
  EXPECT_EQ(emitted, nichi + you);
  EXPECT_TRUE(matcher.stopped());
  ExpectAllSplits({nihon, "\xE2\x80\x94"}, "a" + nichi + you + nihon + "x");
  ExpectAllSplits({"\xE2\x80\x94"}, "caf\xC3\xA9 \xE2\x80\x94 ok");
}

TEST(StopStringsTest, EverySplitAgreesWithTheWholeText) {
  ExpectAllSplits({"STOP"}, "Hello STOP world");
  ExpectAllSplits({"ab", "abc"}, "xxabcab");
  ExpectAllSplits({"abc", "b"}, "zabcz");
  ExpectAllSplits({"aab"}, "aaaabx");
  ExpectAllSplits({"abab"}, "abaababab");
  ExpectAllSplits({"world", "lo", "o w"}, "hello world");
  ExpectAllSplits({"xyz"}, "no stop here");
  ExpectAllSplits({"\n\n", "###"}, "a\n#\n\n##");
}

}  // namespace
}  // namespace baton::tokenizer
