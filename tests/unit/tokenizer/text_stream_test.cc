// TextStream against the whole text at once: streaming ids one by one gives the text that
// decoding them all gives, cut at the stop string that completes first (with or without
// it), whatever characters the tokens split; an id past the vocabulary is refused and
// changes nothing.
#include "tokenizer/text_stream.h"

#include <string>
#include <vector>

#include "common/utf8.h"
#include "gtest/gtest.h"
#include "tests/fuzz/synthetic_vocab.h"

namespace baton::tokenizer {
namespace {

struct Outcome {
  std::string text;
  bool stopped = false;
  std::string matched;
};

// The whole text: the stop that completes first (earliest end, then the longer one).
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

Outcome Stream(const std::shared_ptr<const Tokenizer>& tok, const std::vector<TokenId>& ids,
               const std::vector<std::string>& stops, bool include) {
  TextStream stream(tok, stops, include);
  Outcome out;
  for (const TokenId id : ids) {
    absl::StatusOr<TextStream::Piece> p = stream.Add(id);
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok()) return out;
    EXPECT_TRUE(IsValidUtf8(p->text)) << "a broken character was sent";
    if (out.stopped) {
      EXPECT_TRUE(p->text.empty()) << "text after the stop";
    }
    out.text += p->text;
    if (p->stopped) {
      out.stopped = true;
      out.matched = p->matched;
    }
  }
  const TextStream::Piece tail = stream.Finish();
  out.text += tail.text;
  if (tail.stopped) {
    out.stopped = true;
    out.matched = tail.matched;
  }
  return out;
}

TEST(TextStreamTest, StreamingEqualsTheWholeTextCutAtTheFirstStop) {
  for (const auto& tok : {synthetic::ByteLevel(), synthetic::SentencePiece()}) {
    const std::string text =
        "The cat sat. caf\xC3\xA9 na\xC3\xAFve \xE6\x97\xA5\xE6\x9C\xAC END of it\n\nmore";
    const std::vector<TokenId> ids = tok->Encode(text).value();
    const std::string whole = tok->Decode(ids).value();
    const std::vector<std::vector<std::string>> cases = {
        {},
        {"END"},
        {"sat", "cat"},            // "cat" completes first
        {"\xE6\x97\xA5", "\n\n"},  // a stop inside a multi-byte character's tokens
        {"never there"},
        {"more"},  // completes only at the last token
        {"\xC3\xA9 na", "e. c"},
    };
    for (const auto& stops : cases) {
      for (const bool include : {false, true}) {
        SCOPED_TRACE(::testing::PrintToString(stops) + (include ? " included" : ""));
        const Outcome want = Reference(stops, include, whole);
        const Outcome got = Stream(tok, ids, stops, include);
        EXPECT_EQ(got.text, want.text);
        EXPECT_EQ(got.stopped, want.stopped);
        EXPECT_EQ(got.matched, want.matched);
      }
    }
  }
}

TEST(TextStreamTest, AnIdPastTheVocabularyIsRefusedAndChangesNothing) {
  const auto tok = synthetic::ByteLevel();
  const std::vector<TokenId> ids = tok->Encode("hello there").value();
  TextStream stream(tok, {"xyz"}, false);
  std::string text;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i == 2) {
      const absl::StatusOr<TextStream::Piece> bad = stream.Add(tok->vocab_size());
      ASSERT_FALSE(bad.ok());
      EXPECT_EQ(bad.status().code(), absl::StatusCode::kOutOfRange);
      EXPECT_NE(std::string(bad.status().message()).find("vocabulary of"), std::string::npos);
      EXPECT_FALSE(stream.Add(-1).ok());
    }
    text += stream.Add(ids[i]).value().text;
  }
  text += stream.Finish().text;
  EXPECT_EQ(text, "hello there");
}

}  // namespace
}  // namespace baton::tokenizer
