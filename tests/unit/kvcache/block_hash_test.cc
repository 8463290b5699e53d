#include "kvcache/block_hash.h"

#include <numeric>
#include <vector>

#include "gtest/gtest.h"

namespace baton::kvcache {
namespace {

// Spec vectors (docs/prefix_cache.md, version 1), computed independently with Python's
// hashlib from the spec's byte layout, not from this code.
TEST(BlockHashTest, MatchesTheSpecVectors) {
  const BlockHash root = NamespaceHash({"baton-tiny", "", ""}, 16);
  EXPECT_EQ(root.Hex(), "d8ea4db07bd01ab3930249b5b496daf373624f14534a101fa97fd09adad25b83");
  std::vector<int32_t> tokens(40);
  std::iota(tokens.begin(), tokens.end(), 0);
  const std::vector<BlockHash> blocks = HashFullBlocks(root, tokens, 16);
  ASSERT_EQ(blocks.size(), 2u);  // the 8 tokens of the partial third block are not hashed
  EXPECT_EQ(blocks[0].Hex(), "d08831887dcf57ff406415044bff0df579e1e26dea250916a6af71682b2233b4");
  EXPECT_EQ(blocks[1].Hex(), "ab00ac8c942f1cde20316ade6c3d488e18b466227b0eaf753667de322cc780d6");

  const BlockHash salted = NamespaceHash({"baton-tiny", "", "tenant-a"}, 4);
  EXPECT_EQ(salted.Hex(), "c0045dca64d6420abab225211cc150f5f067257e8f1a775bfe6c6b1b3ab28647");
  const std::vector<int32_t> four = {1, 2, 3, -1};
  EXPECT_EQ(ChainBlockHash(salted, four).Hex(),
            "2b48dd85846e1ca8d3e079d2492f9ad957ff7257920076bdbd69172020415fb4");
}

TEST(BlockHashTest, EveryNamespacePartSeparatesCaches) {
  const BlockHash base = NamespaceHash({"m", "a", "s"}, 16);
  EXPECT_NE(base, NamespaceHash({"m2", "a", "s"}, 16));
  EXPECT_NE(base, NamespaceHash({"m", "a2", "s"}, 16));
  EXPECT_NE(base, NamespaceHash({"m", "a", "s2"}, 16));
  EXPECT_NE(base, NamespaceHash({"m", "a", "s"}, 32));
  // Length prefixes: moving bytes between fields changes the hash.
  EXPECT_NE(NamespaceHash({"ab", "", ""}, 16), NamespaceHash({"a", "b", ""}, 16));
  EXPECT_EQ(base, NamespaceHash({"m", "a", "s"}, 16));
}

TEST(BlockHashTest, ABlockHashDependsOnEveryEarlierToken) {
  const BlockHash root = NamespaceHash({"m", "", ""}, 4);
  std::vector<int32_t> a = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  std::vector<int32_t> b = a;
  b[1] = 99;  // differs in the first block only
  const auto ha = HashFullBlocks(root, a, 4), hb = HashFullBlocks(root, b, 4);
  ASSERT_EQ(ha.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_NE(ha[i], hb[i]) << i;
  // A shared prefix gives shared hashes.
  std::vector<int32_t> c = a;
  c[9] = 99;  // third block differs
  const auto hc = HashFullBlocks(root, c, 4);
  EXPECT_EQ(ha[0], hc[0]);
  EXPECT_EQ(ha[1], hc[1]);
  EXPECT_NE(ha[2], hc[2]);
}

}  // namespace
}  // namespace baton::kvcache
