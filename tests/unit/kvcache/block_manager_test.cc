#include "kvcache/block_manager.h"

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace baton::kvcache {
namespace {

constexpr int64_t kBs = 4;

struct Recorder {
  std::vector<kvcache::KvEventBatch> batches;
  void Attach(kvcache::KvEventPublisher* p) {
    p->Subscribe([this](const kvcache::KvEventBatch& b) { batches.push_back(b); });
  }
};

// A sequence's full blocks and its pages, as a caller of the manager holds them.
struct Held {
  std::vector<int32_t> tokens;
  std::vector<kvcache::BlockHash> hashes;
  std::vector<int32_t> pages;
};

// Admits `tokens` the way the scheduler does: reuse the cached prefix, allocate the rest,
// then store every full block.
bool Admit(BlockManager* m, const kvcache::BlockHash& root, std::vector<int32_t> tokens,
           Held* out) {
  out->tokens = std::move(tokens);
  out->hashes = kvcache::HashFullBlocks(root, out->tokens, kBs);
  const int64_t hit = m->CountCachedPrefix(out->hashes);
  const int64_t need = (static_cast<int64_t>(out->tokens.size()) + kBs - 1) / kBs - hit;
  if (need > m->num_available() - m->CountIdle(out->hashes, hit)) return false;
  out->pages = m->AcquireCached(out->hashes, hit);
  for (int64_t i = 0; i < need; ++i) out->pages.push_back(*m->Allocate());
  for (size_t b = hit; b < out->hashes.size(); ++b) {
    m->Store(out->pages[b], out->hashes[b], b == 0 ? root : out->hashes[b - 1],
             std::span(out->tokens).subspan(b * kBs, kBs));
  }
  m->Flush();
  return true;
}

void ReleaseAll(BlockManager* m, Held* h) {
  for (auto it = h->pages.rbegin(); it != h->pages.rend(); ++it) m->Release(*it);
  h->pages.clear();
  m->Flush();
}

TEST(BlockManagerTest, ReusesCachedPrefixAndCountsPages) {
  kvcache::KvEventPublisher events(kBs, 7);
  BlockManager m(8, true, &events);
  const kvcache::BlockHash root = kvcache::NamespaceHash({"m", "", ""}, kBs);
  Held a, b;
  ASSERT_TRUE(Admit(&m, root, {1, 2, 3, 4, 5, 6, 7, 8, 9}, &a));  // 2 full + 1 partial
  EXPECT_EQ(m.num_in_use(), 3);
  EXPECT_EQ(m.num_cached(), 2);
  ASSERT_TRUE(Admit(&m, root, {1, 2, 3, 4, 5, 6, 7, 8, 42, 43}, &b));
  EXPECT_EQ(b.pages[0], a.pages[0]);
  EXPECT_EQ(b.pages[1], a.pages[1]);
  EXPECT_NE(b.pages[2], a.pages[2]);
  EXPECT_EQ(m.ref_count(a.pages[0]), 2);
  EXPECT_EQ(m.num_in_use(), 4);
  ReleaseAll(&m, &a);
  ReleaseAll(&m, &b);
  EXPECT_EQ(m.num_in_use(), 0);
  EXPECT_EQ(m.num_available(), 8);
  EXPECT_EQ(m.num_cached(), 2);  // still cached, idle
}

TEST(BlockManagerTest, EvictsLeastRecentlyReleasedAndTailsFirst) {
  kvcache::KvEventPublisher events(kBs, 7);
  Recorder rec;
  rec.Attach(&events);
  BlockManager m(4, true, &events);
  const kvcache::BlockHash root = kvcache::NamespaceHash({"m", "", ""}, kBs);
  Held a, b;
  ASSERT_TRUE(Admit(&m, root, {1, 1, 1, 1, 2, 2, 2, 2}, &a));
  ASSERT_TRUE(Admit(&m, root, {3, 3, 3, 3, 4, 4, 4, 4}, &b));
  ReleaseAll(&m, &a);  // idle order: a1, a0
  ReleaseAll(&m, &b);  // then b1, b0
  EXPECT_EQ(m.num_cached(), 4);
  // One new page evicts a's second block (released first, tail first), not its first.
  ASSERT_TRUE(m.Allocate().ok());
  m.Flush();
  EXPECT_EQ(m.CountCachedPrefix(a.hashes), 1);
  EXPECT_EQ(m.CountCachedPrefix(b.hashes), 2);
  ASSERT_FALSE(rec.batches.empty());
  const kvcache::KvEvent& removed = rec.batches.back().events.back();
  EXPECT_EQ(removed.type, kvcache::KvEvent::Type::kBlockRemoved);
  ASSERT_EQ(removed.block_hashes.size(), 1u);
  EXPECT_EQ(removed.block_hashes[0], a.hashes[1]);
}

TEST(BlockManagerTest, ExhaustionIsAClearError) {
  BlockManager m(2, true, nullptr);
  ASSERT_TRUE(m.Allocate().ok());
  ASSERT_TRUE(m.Allocate().ok());
  absl::StatusOr<int32_t> third = m.Allocate();
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(third.status().message().find("all 2 KV pages"), std::string::npos);
}

TEST(BlockManagerTest, DisabledCacheStoresNothing) {
  BlockManager m(4, false, nullptr);
  const kvcache::BlockHash root = kvcache::NamespaceHash({"m", "", ""}, kBs);
  Held a, b;
  ASSERT_TRUE(Admit(&m, root, {1, 2, 3, 4, 5}, &a));
  ASSERT_TRUE(Admit(&m, root, {1, 2, 3, 4, 5}, &b));
  EXPECT_NE(a.pages[0], b.pages[0]);
  EXPECT_EQ(m.num_cached(), 0);
  ReleaseAll(&m, &a);
  ReleaseAll(&m, &b);
  EXPECT_EQ(m.num_available(), 4);
}

TEST(BlockManagerTest, ResetEmptiesTheCacheOnlyWhenIdle) {
  kvcache::KvEventPublisher events(kBs, 7);
  Recorder rec;
  rec.Attach(&events);
  BlockManager m(4, true, &events);
  const kvcache::BlockHash root = kvcache::NamespaceHash({"m", "", ""}, kBs);
  Held a;
  ASSERT_TRUE(Admit(&m, root, {1, 2, 3, 4, 5}, &a));
  EXPECT_EQ(m.ResetPrefixCache().code(), absl::StatusCode::kFailedPrecondition);
  ReleaseAll(&m, &a);
  ASSERT_TRUE(m.ResetPrefixCache().ok());
  m.Flush();
  EXPECT_EQ(m.num_cached(), 0);
  EXPECT_EQ(m.num_available(), 4);
  EXPECT_EQ(rec.batches.back().events.back().type, kvcache::KvEvent::Type::kAllCleared);
  EXPECT_TRUE(events.Snapshot().block_hashes.empty());
}

// The naive reference: a map from full token prefixes (whole blocks) to cache entries,
// plus a count of free pages. It knows nothing of pages, hashes or lists.
class NaiveCache {
 public:
  explicit NaiveCache(int64_t pages) : free_(pages) {}

  struct HeldBlock {
    std::vector<int32_t> key;  // empty: a private page (partial block or duplicate)
  };

  int64_t Hit(const std::vector<int32_t>& tokens) const {
    int64_t hit = 0;
    for (size_t b = 1; b * kBs <= tokens.size(); ++b) {
      if (!entries_.contains(Key(tokens, b))) break;
      ++hit;
    }
    return hit;
  }

  // Mirrors Admit: false when it does not fit.
  bool Admit(const std::vector<int32_t>& tokens, std::vector<HeldBlock>* held) {
    const int64_t hit = Hit(tokens);
    const int64_t blocks = (static_cast<int64_t>(tokens.size()) + kBs - 1) / kBs;
    int64_t idle_hits = 0;
    for (int64_t b = 1; b <= hit; ++b) idle_hits += entries_.at(Key(tokens, b)).refs == 0;
    if (blocks - hit > available() - idle_hits) return false;
    held->clear();
    for (int64_t b = 1; b <= hit; ++b) {
      entries_.at(Key(tokens, b)).refs++;
      held->push_back({Key(tokens, b)});
    }
    // Allocate every new page first (evicting the least recently released idle entry
    // when no page is free), then store the full blocks, as the manager's caller does.
    for (int64_t i = hit; i < blocks; ++i) {
      if (free_ > 0) {
        --free_;
        continue;
      }
      auto victim = entries_.end();
      for (auto it = entries_.begin(); it != entries_.end(); ++it) {
        if (it->second.refs == 0 &&
            (victim == entries_.end() || it->second.released < victim->second.released)) {
          victim = it;
        }
      }
      EXPECT_NE(victim, entries_.end());
      entries_.erase(victim);
    }
    const int64_t full = static_cast<int64_t>(tokens.size()) / kBs;
    for (int64_t b = hit + 1; b <= blocks; ++b) {
      if (b <= full && !entries_.contains(Key(tokens, b))) {
        entries_[Key(tokens, b)] = Entry{1, 0};
        held->push_back({Key(tokens, b)});
      } else {
        held->push_back({});
      }
    }
    return true;
  }

  void Release(const std::vector<HeldBlock>& held) {
    for (auto it = held.rbegin(); it != held.rend(); ++it) {
      if (it->key.empty()) {
        ++free_;
        continue;
      }
      Entry& e = entries_.at(it->key);
      if (--e.refs == 0) e.released = ++tick_;
    }
  }

  int64_t available() const {
    int64_t idle = 0;
    for (const auto& [key, e] : entries_) idle += e.refs == 0;
    return free_ + idle;
  }
  std::set<kvcache::BlockHash> Hashes(const kvcache::BlockHash& root) const {
    std::set<kvcache::BlockHash> out;
    for (const auto& [key, e] : entries_)
      out.insert(kvcache::HashFullBlocks(root, key, kBs).back());
    return out;
  }
  int64_t size() const { return static_cast<int64_t>(entries_.size()); }

 private:
  struct Entry {
    int refs = 0;
    uint64_t released = 0;
  };
  static std::vector<int32_t> Key(const std::vector<int32_t>& tokens, int64_t blocks) {
    return {tokens.begin(), tokens.begin() + blocks * kBs};
  }
  int64_t free_;
  uint64_t tick_ = 0;
  std::map<std::vector<int32_t>, Entry> entries_;
};

// The property test: random admissions and releases, on the manager and on the naive
// reference. After every operation both agree on the prefix each prompt finds, on the
// pages available, on what is cached (by eviction too), and the published events add
// up to the same set as the snapshot.
TEST(BlockManagerTest, MatchesANaivePrefixCacheUnderRandomOperations) {
  for (uint32_t seed = 1; seed <= 30; ++seed) {
    std::mt19937 rng(seed);
    const int64_t num_pages = 4 + static_cast<int64_t>(rng() % 20);
    kvcache::KvEventPublisher events(kBs, seed);
    std::set<kvcache::BlockHash> from_events;
    uint64_t last_seq = 0;
    events.Subscribe([&](const kvcache::KvEventBatch& b) {
      EXPECT_EQ(b.sequence, last_seq + 1);
      last_seq = b.sequence;
      for (const kvcache::KvEvent& e : b.events) {
        if (e.type == kvcache::KvEvent::Type::kBlockStored) {
          EXPECT_EQ(e.token_ids.size(), e.block_hashes.size() * kBs);
          for (const kvcache::BlockHash& h : e.block_hashes)
            EXPECT_TRUE(from_events.insert(h).second);
        } else if (e.type == kvcache::KvEvent::Type::kBlockRemoved) {
          for (const kvcache::BlockHash& h : e.block_hashes) EXPECT_EQ(from_events.erase(h), 1u);
        } else {
          from_events.clear();
        }
      }
    });
    BlockManager m(num_pages, true, &events);
    NaiveCache naive(num_pages);
    const kvcache::BlockHash root = kvcache::NamespaceHash({"m", "", ""}, kBs);
    struct Live {
      Held held;
      std::vector<NaiveCache::HeldBlock> naive;
    };
    std::vector<Live> live;
    for (int op = 0; op < 500; ++op) {
      SCOPED_TRACE(::testing::Message() << "seed " << seed << " op " << op);
      if (live.empty() || rng() % 5 < 3) {
        // A small alphabet so prefixes collide often.
        std::vector<int32_t> tokens(1 + rng() % (4 * kBs));
        const auto family = static_cast<int32_t>(rng() % 3);
        for (size_t i = 0; i < tokens.size(); ++i) {
          tokens[i] = i < kBs ? family : static_cast<int32_t>(rng() % 2);
        }
        ASSERT_EQ(m.CountCachedPrefix(kvcache::HashFullBlocks(root, tokens, kBs)),
                  naive.Hit(tokens));
        Live l;
        const bool fits = naive.Admit(tokens, &l.naive);
        ASSERT_EQ(Admit(&m, root, tokens, &l.held), fits);
        if (fits) live.push_back(std::move(l));
      } else {
        const size_t i = rng() % live.size();
        naive.Release(live[i].naive);
        ReleaseAll(&m, &live[i].held);
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
      }
      ASSERT_EQ(m.num_available(), naive.available());
      ASSERT_EQ(m.num_cached(), naive.size());
      ASSERT_EQ(from_events, naive.Hashes(root));
      std::set<int32_t> held;
      for (const Live& l : live) held.insert(l.held.pages.begin(), l.held.pages.end());
      ASSERT_EQ(m.num_in_use(), static_cast<int64_t>(held.size()));
    }
    const kvcache::KvSnapshot snap = events.Snapshot();
    EXPECT_EQ(std::set<kvcache::BlockHash>(snap.block_hashes.begin(), snap.block_hashes.end()),
              from_events);
    EXPECT_EQ(snap.sequence, last_seq);
    for (Live& l : live) ReleaseAll(&m, &l.held);
    EXPECT_EQ(m.num_in_use(), 0);
    EXPECT_EQ(m.num_available(), num_pages);
  }
}

}  // namespace
}  // namespace baton::kvcache
