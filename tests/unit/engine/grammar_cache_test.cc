// GrammarCache (engine/grammar_cache.h): one TokenGrammar per schema, returned with every
// position table built, so that a request's decode steps never build one; a bad schema is
// the same clear error each time and evicts nothing; concurrent callers with one new
// schema share one build.
#include "engine/grammar_cache.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "grammar/grammar_matcher.h"
#include "gtest/gtest.h"
#include "tokenizer/loader.h"

namespace baton::engine {
namespace {

using ::testing::HasSubstr;

std::shared_ptr<const tokenizer::Tokenizer> Tiny() {
  static auto files =
      tokenizer::LoadTokenizerFiles(std::string(BATON_SOURCE_DIR) + "/models/baton-tiny");
  EXPECT_TRUE(files.ok()) << files.status();
  return files.ok() ? files->tokenizer : nullptr;
}

OutputConstraint Schema(std::string text) {
  OutputConstraint c;
  c.kind = OutputConstraint::Kind::kJsonSchema;
  c.json_schema = std::move(text);
  return c;
}

constexpr char kItem[] = R"({"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 8}, "count": {"type": "integer"}},
  "required": ["name", "count"], "additionalProperties": false})";

size_t BytesPositions(const grammar::Grammar& g) {
  size_t n = 0;
  for (int32_t pos = 0; pos < g.num_positions(); ++pos) {
    n += g.element(pos).kind == grammar::Grammar::Kind::kBytes;
  }
  return n;
}

TEST(GrammarCacheTest, NoConstraintIsNoGrammar) {
  GrammarCache cache(Tiny());
  auto g = cache.Get(OutputConstraint{});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(*g, nullptr);
  EXPECT_EQ(cache.compiles(), 0u);
}

TEST(GrammarCacheTest, EveryTableIsBuiltBeforeTheFirstStep) {
  GrammarCache cache(Tiny());
  auto g = cache.Get(Schema(kItem));
  ASSERT_TRUE(g.ok()) << g.status();
  const size_t tables = (*g)->tables_built();
  EXPECT_EQ(tables, BytesPositions((*g)->grammar()));
  // A document's steps find every table built.
  grammar::GrammarMatcher m(*g);
  std::vector<uint32_t> mask((*g)->mask_words());
  for (const char* piece : {"{", "\"name\"", ": ", "\"ab\"", ", ", "\"count\"", ": ", "12"}) {
    m.FillMask(mask);
    ASSERT_TRUE(m.AcceptBytes(piece).ok()) << piece;
  }
  m.FillMask(mask);
  EXPECT_EQ((*g)->tables_built(), tables);

  auto again = cache.Get(Schema(kItem));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->get(), g->get());
  EXPECT_EQ(cache.compiles(), 1u);
  auto object = cache.Get(OutputConstraint{OutputConstraint::Kind::kJsonObject, ""});
  ASSERT_TRUE(object.ok()) << object.status();
  EXPECT_NE(object->get(), g->get());
  EXPECT_EQ((*object)->tables_built(), BytesPositions((*object)->grammar()));
}

TEST(GrammarCacheTest, AnUnsupportedSchemaIsRefusedEachTimeAndPushesNothingOut) {
  GrammarCache cache(Tiny(), /*capacity=*/1);
  auto good = cache.Get(Schema(kItem));
  ASSERT_TRUE(good.ok()) << good.status();
  for (int i = 0; i < 3; ++i) {
    auto g = cache.Get(Schema(R"({"type": "string", "pattern": "^a+$"})"));
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(g.status().message(), HasSubstr("pattern"));
  }
  EXPECT_EQ(cache.compiles(), 4u);  // the bad one is compiled (and refused) each time
  auto again = cache.Get(Schema(kItem));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->get(), good->get());
  EXPECT_EQ(cache.compiles(), 4u);
}

TEST(GrammarCacheTest, ConcurrentCallersShareOneBuild) {
  GrammarCache cache(Tiny());
  constexpr int kThreads = 8;
  std::vector<const grammar::TokenGrammar*> got(kThreads, nullptr);
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Half ask for kItem, half for json_object.
      auto g = t % 2 == 0 ? cache.Get(Schema(kItem))
                          : cache.Get(OutputConstraint{OutputConstraint::Kind::kJsonObject, ""});
      if (g.ok()) got[t] = g->get();
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_NE(got[t], nullptr) << t;
    EXPECT_EQ(got[t], got[t % 2]) << t;
  }
  EXPECT_NE(got[0], got[1]);
  EXPECT_EQ(cache.compiles(), 2u);
}

TEST(GrammarCacheTest, TheLeastRecentlyUsedGoesFirst) {
  GrammarCache cache(Tiny(), /*capacity=*/2);
  const auto a = Schema(R"({"type": "integer"})");
  const auto b = Schema(R"({"type": "boolean"})");
  const auto c = Schema(R"({"type": "null"})");
  ASSERT_TRUE(cache.Get(a).ok());
  ASSERT_TRUE(cache.Get(b).ok());
  ASSERT_TRUE(cache.Get(a).ok());  // b is now the oldest
  ASSERT_TRUE(cache.Get(c).ok());  // evicts b
  EXPECT_EQ(cache.compiles(), 3u);
  ASSERT_TRUE(cache.Get(a).ok());
  EXPECT_EQ(cache.compiles(), 3u);
  ASSERT_TRUE(cache.Get(b).ok());
  EXPECT_EQ(cache.compiles(), 4u);
}

}  // namespace
}  // namespace baton::engine
