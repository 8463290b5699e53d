// GrammarMatcher against oracles: random walks whose documents a reference validator
// checks, masks against brute force (copy the matcher, try every token), cached masks
// against uncached ones, and known documents byte by byte.
#include "grammar/grammar_matcher.h"

#include <gtest/gtest.h>

#include <atomic>
#include <climits>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "grammar/json_rules.h"
#include "grammar/json_schema.h"
#include "grammar/token_grammar.h"
#include "grammar/token_vocab.h"
#include "tests/unit/grammar/hf_vocab.h"
#include "tests/unit/grammar/schema_corpus.h"

namespace baton::grammar {
namespace {

using testing::Json;

// Every single byte, multi-byte tokens that cross grammar boundaries, a split "é", a
// special token and an empty one.
std::shared_ptr<const TokenVocab> SyntheticVocab() {
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
  for (const char* t :
       {"{\"",      "\":",      "\"name",      " true", "123",          "\xc3\xa9", "a\xc3",
        "\xa9z",    "\", \"",   "},",          "\"}",   "[{\"",         "\\n",      "\\u00",
        "\\ud83d",  "\\ude00",  "null",        "false", "-1",           ".5",       "e+",
        " \"",      " {",       "\n  ",        "  ",    "\"\n",         "1.0",      "\":\"",
        "\"]",      "]}",       "true",        "0.",    "00",           "2024-",    "01-",
        "T12:",     "00Z",      "-4",          "abc",   "\xe6\x97\xa5", "\xe6",     "\x97\xa5",
        "\xf0\x9f", "\x98\x80", "\", ",        "\":[",  "\": ",         "{}",       "[]",
        "cel",      "sius",     "\"type\":\"", "div"}) {
    bytes.push_back(t);
  }
  std::vector<bool> special(bytes.size(), false);
  bytes.push_back("<eos>");
  special.push_back(true);
  bytes.push_back("");
  special.push_back(false);
  return *MakeTokenVocab(std::move(bytes), std::move(special));
}

std::shared_ptr<const TokenGrammar> Bind(std::string_view schema,
                                         std::shared_ptr<const TokenVocab> vocab) {
  auto g = CompileJsonSchema(schema);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return nullptr;
  return *TokenGrammar::Create(*g, std::move(vocab));
}

std::vector<int32_t> Allowed(const std::vector<uint32_t>& mask, int32_t n) {
  std::vector<int32_t> out;
  for (int32_t id = 0; id < n; ++id) {
    if ((mask[id >> 5] >> (id & 31)) & 1) out.push_back(id);
  }
  return out;
}

std::vector<uint32_t> BruteForce(const GrammarMatcher& m) {
  std::vector<uint32_t> mask((m.vocab_size() + 31) / 32, 0);
  for (int32_t id = 0; id < m.vocab_size(); ++id) {
    GrammarMatcher copy = m;
    if (copy.Accept(id).ok()) mask[id >> 5] |= 1u << (id & 31);
  }
  return mask;
}

struct Walk {
  std::string text;
  bool complete = false;
  bool dead_end = false;
};

// A seeded random walk: a random allowed token each step, leaning to tokens that close
// strings and containers so documents finish. `check` compares masks every step.
Walk RandomWalk(std::shared_ptr<const TokenGrammar> tg, uint32_t seed, bool check) {
  std::mt19937 rng(seed);
  GrammarMatcher m(tg);
  std::vector<uint32_t> mask(tg->mask_words() + 1);
  Walk w;
  for (int step = 0; step < 3000; ++step) {
    if (m.MustEnd() || (m.CanEnd() && rng() % 3 == 0)) break;
    m.FillMask(mask);
    if (check) {
      std::vector<uint32_t> uncached(mask.size());
      m.FillMaskUncached(uncached);
      EXPECT_EQ(mask, uncached) << "cached and uncached masks differ after " << w.text;
      std::vector<uint32_t> brute = BruteForce(m);
      brute.push_back(0);
      EXPECT_EQ(mask, brute) << "mask differs from brute force after '" << w.text << "'";
      if (mask != brute) {
        for (int32_t id = 0; id < m.vocab_size(); ++id) {
          const bool a = (mask[id >> 5] >> (id & 31)) & 1, b = (brute[id >> 5] >> (id & 31)) & 1;
          if (a != b) {
            ADD_FAILURE() << "token " << id << " '" << tg->vocab().bytes(id) << "' mask=" << a
                          << " brute=" << b;
            break;
          }
        }
        check = false;
      }
    }
    const std::vector<int32_t> allowed = Allowed(mask, m.vocab_size());
    if (allowed.empty()) {
      w.dead_end = true;
      return w;
    }
    std::vector<int32_t> closing;
    for (int32_t id : allowed) {
      if (tg->vocab().bytes(id).find_first_of("\"}],") != std::string::npos) closing.push_back(id);
    }
    const auto& pool = !closing.empty() && rng() % 10 < 6 ? closing : allowed;
    const int32_t pick = pool[rng() % pool.size()];
    EXPECT_TRUE(m.Accept(pick).ok()) << "allowed token " << pick << " refused";
    w.text += tg->vocab().bytes(pick);
  }
  w.complete = m.CanEnd();
  return w;
}

TEST(GrammarMatcherTest, RandomWalksValidateAgainstTheirSchemas) {
  auto vocab = SyntheticVocab();
  for (const auto& [name, schema] : testing::SchemaCorpus()) {
    SCOPED_TRACE(name);
    auto tg = Bind(schema, vocab);
    ASSERT_NE(tg, nullptr);
    const Json schema_json = Json::parse(schema);
    int complete = 0;
    for (uint32_t seed = 0; seed < 40; ++seed) {
      Walk w = RandomWalk(tg, seed * 7919 + 1, /*check=*/false);
      ASSERT_FALSE(w.dead_end) << "no token allowed after '" << w.text << "'";
      if (!w.complete) continue;
      // Every number the grammar allows fits a double (2 exponent digits), so every
      // finished document parses.
      const Json doc = Json::parse(w.text, nullptr, false);
      ASSERT_FALSE(doc.is_discarded()) << "not JSON: '" << w.text << "'";
      ++complete;
      EXPECT_TRUE(testing::Validate(schema_json, schema_json, doc)) << "invalid: " << w.text;
    }
    EXPECT_GE(complete, 10) << "too few walks finished a document";
  }
}

TEST(GrammarMatcherTest, MasksEqualBruteForceAndUncached) {
  auto vocab = SyntheticVocab();
  for (const auto& [name, schema] : testing::SchemaCorpus()) {
    SCOPED_TRACE(name);
    auto tg = Bind(schema, vocab);
    ASSERT_NE(tg, nullptr);
    for (uint32_t seed = 0; seed < 3; ++seed) {
      Walk w = RandomWalk(tg, seed + 100, /*check=*/true);
      EXPECT_FALSE(w.dead_end);
    }
  }
}

// Sequences on one TokenGrammar share its tables and state cache from several threads;
// each thread's masks must still equal its own uncached ones.
TEST(GrammarMatcherTest, SharedTokenGrammarAcrossThreads) {
  auto tg = Bind(testing::SchemaCorpus()[1].schema, SyntheticVocab());  // recursive UI
  ASSERT_NE(tg, nullptr);
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (uint32_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (uint32_t seed = 0; seed < 10; ++seed) {
        std::mt19937 rng(t * 1000 + seed);
        GrammarMatcher m(tg);
        std::vector<uint32_t> mask(tg->mask_words()), uncached(tg->mask_words());
        for (int step = 0; step < 200 && !m.MustEnd(); ++step) {
          m.FillMask(mask);
          m.FillMaskUncached(uncached);
          if (mask != uncached) ++mismatches;
          const std::vector<int32_t> allowed = Allowed(mask, m.vocab_size());
          if (allowed.empty() || !m.Accept(allowed[rng() % allowed.size()]).ok()) {
            ++mismatches;
            break;
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_GT(tg->masks().hits(), 0u);
}

TEST(GrammarMatcherTest, JsonObjectMaskIsExact) {
  auto tg = *TokenGrammar::Create(JsonObjectGrammar(), SyntheticVocab());
  for (uint32_t seed = 0; seed < 5; ++seed) {
    Walk w = RandomWalk(tg, seed, /*check=*/true);
    EXPECT_FALSE(w.dead_end);
    if (w.complete) {
      EXPECT_TRUE(Json::parse(w.text, nullptr, false).is_object()) << w.text;
    }
  }
}

// Feeds `text` one single-byte token at a time; returns the index of the first refused
// byte, or -1.
int FirstRefusedByte(std::shared_ptr<const TokenGrammar> tg, std::string_view text,
                     bool* complete) {
  GrammarMatcher m(tg);
  for (size_t i = 0; i < text.size(); ++i) {
    if (!m.Accept(static_cast<uint8_t>(text[i])).ok()) return static_cast<int>(i);
  }
  *complete = m.CanEnd();
  return -1;
}

TEST(GrammarMatcherTest, AcceptsDocumentsByteByByte) {
  auto vocab = SyntheticVocab();
  struct Case {
    const char* schema;
    const char* doc;
  };
  const Case cases[] = {
      {R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},
          "required":["name"]})",
       R"({"name": "Zoë \"q\" \\ \u00e9 \ud83d\ude00 日本", "age": -42})"},
      {R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}}})",
       "{ \"age\": 7 }"},
      {R"({"type":"object","properties":{"a":{"type":"number"}}})", R"( {"a":-0.5e+10})"},
      {R"({"type":"array","items":{"type":"boolean"}})", "[ true, false, true ]"},
      {R"({"type":"string","format":"date-time"})", R"("2024-02-29T23:59:59.123+05:30")"},
      {R"({"type":"string","format":"uuid"})", R"("123e4567-e89b-12d3-a456-426614174000")"},
      {R"({"enum":["a",{"b":[1,null]}]})", R"({"b":[1,null]})"},
      {R"({})", R"([{"x": [1, 2.5, "y", null, {}]}, [], true])"},
  };
  for (const auto& c : cases) {
    bool complete = false;
    EXPECT_EQ(FirstRefusedByte(Bind(c.schema, vocab), c.doc, &complete), -1) << c.doc;
    EXPECT_TRUE(complete) << c.doc;
  }
}

TEST(GrammarMatcherTest, RefusesInvalidDocumentsAtTheRightByte) {
  auto vocab = SyntheticVocab();
  const char* person = R"({"type":"object","properties":{"name":{"type":"string"},
      "age":{"type":"integer"}},"required":["name"],"additionalProperties":false})";
  struct Case {
    const char* schema;
    const char* doc;
    int at;
  };
  const Case cases[] = {
      {person, R"({"age": 1})", 2},                        // required "name" comes first
      {person, R"({"name": "x", "age": 01})", 22},         // leading zero
      {person, R"({"name": "x", "nick": 1})", 15},         // unknown property
      {person, "{\"name\": \"a\x01\"}", 11},               // raw control character
      {person, "{\"name\": \"\xc3\x28\"}", 11},            // bad UTF-8 continuation
      {person, "{\"name\": \"\x80\"}", 10},                // lone continuation byte
      {person, "{\"name\": \"\xed\xa0\x80\"}", 11},        // UTF-8 surrogate
      {person, R"({"name": "\x"})", 11},                   // bad escape
      {person, R"({"name": "\udc00"})", 13},               // lone low surrogate
      {person, R"({"name":  "x"})", 9},                    // two spaces after ':'
      {person, R"({"name": "x"} )", 13},                   // nothing after the root
      {R"({"type":"integer"})", "12345678901234567", 16},  // 17 digits
      {R"({"type":"array","items":{"type":"integer"},"maxItems":2})", "[1,2,3]", 4},
      {R"({"type":"string","format":"date"})", R"("2023-02-30")", 9},
      {R"({"type":"string","maxLength":2})", R"("abc")", 3},
      {person, "{\n\"name\": \"x\"}", 1},  // newline
      {person, "{  \"name\": \"x\"}", 2},  // two spaces after '{'
      {person, "{\"name\":\t\"x\"}", 8},   // tab
      {R"({"type":"integer","minimum":1,"maximum":100})", "101", 2},
      {R"({"type":"integer","minimum":1,"maximum":100})", "0", 0},
      {R"({"type":"integer","minimum":-5,"maximum":5})", "-0", 1},
  };
  for (const auto& c : cases) {
    bool complete = false;
    EXPECT_EQ(FirstRefusedByte(Bind(c.schema, vocab), c.doc, &complete), c.at) << c.doc;
  }
}

TEST(GrammarMatcherTest, WhitespaceIsAtMostOneSpace) {
  auto tg = Bind(R"({"type":"object"})", SyntheticVocab());
  bool complete = false;
  EXPECT_EQ(FirstRefusedByte(tg, R"( { "a": [ 1, 2 ], "b": {} })", &complete), -1);
  EXPECT_TRUE(complete);
  EXPECT_EQ(FirstRefusedByte(tg, R"({"a":[1,2],"b":{}})", &complete), -1);
  EXPECT_TRUE(complete);
  EXPECT_EQ(FirstRefusedByte(tg, "{\n\"a\": 1}", &complete), 1);
  EXPECT_EQ(FirstRefusedByte(tg, "{\"a\": [1,  2]}", &complete), 10);
  EXPECT_EQ(FirstRefusedByte(tg, "{\"a\": 1\n}", &complete), 7);
  EXPECT_EQ(FirstRefusedByte(tg, "{\"a\" : 1}", &complete), 4);  // none before ':'
}

// {"type": "integer"} with bounds: every integer in a sample (all within 1000 of each
// bound and of 0, plus random ones of every length) is accepted, byte by byte, iff it is
// in the range and has at most kMaxIntDigits digits; random walks end in range.
TEST(GrammarMatcherTest, IntegerRangesAreExact) {
  auto vocab = SyntheticVocab();
  constexpr int64_t kNone = INT64_MIN;
  struct Case {
    const char* bounds;  // the schema's keywords besides "type"
    int64_t lo, hi;      // kNone: open
  };
  const int64_t zod = 9007199254740991;
  const Case cases[] = {
      {R"("minimum":0,"maximum":0)", 0, 0},
      {R"("minimum":0,"maximum":9)", 0, 9},
      {R"("minimum":1,"maximum":100)", 1, 100},
      {R"("minimum":-5,"maximum":5)", -5, 5},
      {R"("minimum":-100,"maximum":-7)", -100, -7},
      {R"("minimum":13,"maximum":4567)", 13, 4567},
      {R"("minimum":0,"maximum":9007199254740991)", 0, zod},
      {R"("minimum":-9007199254740991,"maximum":9007199254740991)", -zod, zod},
      {R"("minimum":10)", 10, kNone},
      {R"("maximum":-3)", kNone, -3},
      {R"("exclusiveMinimum":0,"exclusiveMaximum":10)", 1, 9},
      {R"("exclusiveMinimum":-10,"maximum":99)", -9, 99},
      {R"("minimum":5,"exclusiveMaximum":1000)", 5, 999},
      {R"("minimum":-1000,"exclusiveMinimum":-5,"exclusiveMaximum":-1)", -4, -2},
      {R"("minimum":2.5,"maximum":7.5)", 3, 7},
      {R"("exclusiveMinimum":2.5,"exclusiveMaximum":7.0)", 3, 6},
      {R"("minimum":3,"exclusiveMinimum":true,"maximum":8,"exclusiveMaximum":false)", 4, 8},
      {R"("minimum":-99999999999999999)", kNone, kNone},
  };
  std::mt19937_64 rng(42);
  for (const auto& c : cases) {
    const std::string schema = std::string(R"({"type":"integer",)") + c.bounds + "}";
    SCOPED_TRACE(schema);
    auto tg = Bind(schema, vocab);
    ASSERT_NE(tg, nullptr);
    auto in = [&](int64_t v) {
      return (c.lo == kNone || v >= c.lo) && (c.hi == kNone || v <= c.hi) &&
             v >= -kMaxIntMagnitude && v <= kMaxIntMagnitude;
    };
    std::vector<int64_t> sample;
    for (int64_t center : {c.lo, c.hi, int64_t{0}, kMaxIntMagnitude, -kMaxIntMagnitude}) {
      if (center == kNone) continue;
      for (int64_t d = -1000; d <= 1000; ++d) sample.push_back(center + d);
    }
    for (int i = 0; i < 2000; ++i) {
      const int digits = 1 + static_cast<int>(rng() % 18);
      int64_t mod = 1;
      for (int k = 0; k < digits; ++k) mod *= 10;
      const int64_t v = static_cast<int64_t>(rng() % static_cast<uint64_t>(mod));
      sample.push_back(rng() % 2 ? v : -v);
    }
    int accepted = 0;
    for (int64_t v : sample) {
      const std::string text = std::to_string(v);
      bool complete = false;
      const bool ok = FirstRefusedByte(tg, text, &complete) == -1 && complete;
      EXPECT_EQ(ok, in(v)) << text;
      accepted += ok;
    }
    EXPECT_GT(accepted, 0);
    // "-0", leading zeros and a space before the root.
    bool complete = false;
    EXPECT_NE(FirstRefusedByte(tg, "-0", &complete), -1);
    EXPECT_NE(FirstRefusedByte(tg, "007", &complete), -1);
    for (uint32_t seed = 0; seed < 40; ++seed) {
      Walk w = RandomWalk(tg, seed * 7919 + 1, /*check=*/seed < 3);
      ASSERT_FALSE(w.dead_end) << "no token allowed after '" << w.text << "'";
      if (!w.complete) continue;
      const std::string text = w.text[0] == ' ' ? w.text.substr(1) : w.text;
      int64_t v = 0;
      ASSERT_TRUE(absl::SimpleAtoi(text, &v)) << w.text;
      EXPECT_EQ(std::to_string(v), text);
      EXPECT_TRUE(in(v)) << w.text;
    }
  }
}

TEST(GrammarMatcherTest, SpecialEmptyAndOutOfRangeTokensAreRefused) {
  auto vocab = SyntheticVocab();
  auto tg = Bind(R"({"type":"string"})", vocab);
  GrammarMatcher m(tg);
  std::vector<uint32_t> mask(tg->mask_words());
  m.FillMask(mask);
  const int32_t eos = vocab->size() - 2, empty = vocab->size() - 1;
  EXPECT_FALSE((mask[eos >> 5] >> (eos & 31)) & 1);
  EXPECT_FALSE((mask[empty >> 5] >> (empty & 31)) & 1);
  EXPECT_FALSE(m.Accept(eos).ok());
  EXPECT_FALSE(m.Accept(empty).ok());
  EXPECT_FALSE(m.Accept(-1).ok());
  EXPECT_FALSE(m.Accept(vocab->size()).ok());
  EXPECT_FALSE(m.Accept('x').ok());  // state unchanged: a string starts with '"'
  EXPECT_TRUE(m.Accept('"').ok());
  EXPECT_FALSE(m.CanEnd());
  EXPECT_TRUE(m.Accept('"').ok());
  EXPECT_TRUE(m.CanEnd());
  EXPECT_TRUE(m.MustEnd());
  m.FillMask(mask);
  EXPECT_EQ(Allowed(mask, vocab->size()).size(), 0u);
}

TEST(GrammarMatcherTest, RootNumberCanEndButNeedNot) {
  auto tg = Bind(R"({"type":"integer"})", SyntheticVocab());
  GrammarMatcher m(tg);
  EXPECT_TRUE(m.Accept(' ').ok());
  EXPECT_TRUE(m.Accept('1').ok());
  EXPECT_TRUE(m.CanEnd());
  EXPECT_FALSE(m.MustEnd());
}

// A token that can finish a rule at two of its bytes ("aab" finishes A after "a" and after
// "aa") is allowed when either rest of it goes on from the real stack: after "x" only
// "b" may follow A, after "y" only "c". The table keeps both tails of "aab" ("ab" and "b"),
// and the mask takes the one that lives.
TEST(GrammarMatcherTest, AnUncertainTokenIsInWhenAnyOfItsTailsIs) {
  // A ::= "a" O, O ::= "a" | "": one position, finished after one byte or after two.
  GrammarBuilder b;
  const int32_t root = b.AddRule("root");
  const int32_t a = b.AddRule("A");
  const int32_t o = b.AddRule("O");
  b.AddAlternative(a, {GrammarBuilder::Byte('a'), GrammarBuilder::Rule(o)});
  b.AddAlternative(o, GrammarBuilder::Literal("a"));
  b.AddAlternative(o, {});
  for (const char* follow : {"xb", "yc"}) {
    b.AddAlternative(root, {GrammarBuilder::Byte(follow[0]), GrammarBuilder::Rule(a),
                            GrammarBuilder::Byte(follow[1])});
  }
  auto g = std::move(b).Build(root);
  ASSERT_TRUE(g.ok()) << g.status();
  const std::vector<std::string> tokens = {"x",   "y", "a", "aa",   "ab",  "aab", "ac",
                                           "aac", "b", "c", "aaab", "abb", "aabc"};
  auto vocab = *MakeTokenVocab(tokens, std::vector<bool>(tokens.size(), false));
  auto tg = *TokenGrammar::Create(*g, vocab);
  auto allowed_after = [&](const char* first) {
    GrammarMatcher m(tg);
    EXPECT_TRUE(m.AcceptBytes(first).ok());
    std::vector<uint32_t> mask(tg->mask_words());
    m.FillMask(mask);
    EXPECT_EQ(mask, BruteForce(m)) << "after " << first;
    std::vector<std::string> out;
    for (int32_t id : Allowed(mask, vocab->size())) out.push_back(tokens[id]);
    return out;
  };
  EXPECT_EQ(allowed_after("x"), (std::vector<std::string>{"a", "aa", "ab", "aab"}));
  EXPECT_EQ(allowed_after("y"), (std::vector<std::string>{"a", "aa", "ac", "aac"}));
}

TEST(GrammarMatcherTest, Llama3MasksEqualBruteForce) {
  testing::HfVocab hf;
  const std::string path = std::string(BATON_TESTDATA_DIR) + "/tokenizers/hf/llama3/tokenizer.json";
  if (!testing::LoadHfVocab(path, &hf)) GTEST_SKIP() << "no Llama 3 vocabulary at " << path;
  auto vocab = *MakeTokenVocab(hf.bytes, hf.special);
  auto tg = Bind(testing::SchemaCorpus()[0].schema, vocab);  // math reasoning
  ASSERT_NE(tg, nullptr);
  GrammarMatcher m(tg);
  const std::string doc = R"({"steps": [{"explanation": "Add 2 and 3", "output": "5"}], )";
  std::vector<uint32_t> mask(tg->mask_words());
  size_t checked = 0;
  for (size_t i = 0; i < doc.size(); ++i) {
    // Brute force costs a copy per token (128k), so only at a few prefixes.
    if (i == 0 || i == 1 || i == 13 || i == 20 || i == 40 || i == 52 || i == doc.size() - 1) {
      m.FillMask(mask);
      EXPECT_EQ(mask, BruteForce(m)) << "after '" << doc.substr(0, i) << "'";
      ++checked;
    }
    ASSERT_TRUE(m.AcceptBytes(doc.substr(i, 1)).ok()) << i;
  }
  EXPECT_EQ(checked, 7u);
}

}  // namespace
}  // namespace baton::grammar
