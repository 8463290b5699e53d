// KvIndex against a naive model (per worker, a set of full hashes; a prefix match is a
// walk down the prompt's hashes): random stores, removals and clears over chains that
// share prefixes, with gaps, restarts (new epochs) and snapshots; and the TTL of the
// approximate mode.
#include "routing/kv_index.h"

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "kvcache/block_hash.h"

namespace baton::routing {
namespace {

using kvcache::BlockHash;
using kvcache::KvEvent;
using kvcache::KvEventBatch;
using kvcache::KvSnapshot;

// Chains of block hashes over a few shared prefixes: prompt p is prefix (p % 4) + its own
// tail, so prompts share their first blocks in groups.
std::vector<std::vector<BlockHash>> MakeChains(int n, int blocks, std::mt19937* rng) {
  const BlockHash root = kvcache::NamespaceHash({.model = "m", .adapter = "", .cache_salt = ""}, 4);
  std::vector<std::vector<int32_t>> prefixes(4);
  for (auto& p : prefixes) {
    for (int i = 0; i < 4 * (blocks / 2); ++i) p.push_back(static_cast<int32_t>((*rng)() % 1000));
  }
  std::vector<std::vector<BlockHash>> chains;
  for (int c = 0; c < n; ++c) {
    std::vector<int32_t> tokens = prefixes[c % 4];
    while (static_cast<int>(tokens.size()) < 4 * blocks) {
      tokens.push_back(static_cast<int32_t>((*rng)() % 1000));
    }
    chains.push_back(kvcache::HashFullBlocks(root, tokens, 4));
  }
  return chains;
}

using Naive = std::map<WorkerId, std::set<BlockHash>>;

std::map<WorkerId, int64_t> NaiveMatch(const Naive& naive, const std::vector<BlockHash>& q) {
  std::map<WorkerId, int64_t> out;
  for (const auto& [w, held] : naive) {
    int64_t n = 0;
    while (n < static_cast<int64_t>(q.size()) && held.contains(q[n])) ++n;
    if (n > 0) out[w] = n;
  }
  return out;
}

std::map<WorkerId, int64_t> IndexMatch(const KvIndex& index, const std::vector<BlockHash>& q) {
  std::vector<PrefixMatch> m;
  index.MatchPrefix(q, &m);
  std::map<WorkerId, int64_t> out;
  for (const PrefixMatch& x : m) {
    EXPECT_FALSE(out.contains(x.worker)) << "worker " << x.worker << " reported twice";
    out[x.worker] = x.blocks;
  }
  return out;
}

KvSnapshot SnapshotOf(const std::set<BlockHash>& held, uint64_t epoch, uint64_t seq) {
  KvSnapshot s;
  s.epoch = epoch;
  s.sequence = seq;
  s.block_size = 4;
  s.block_hashes.assign(held.begin(), held.end());
  return s;
}

TEST(KvIndexTest, MatchesNaiveModelThroughGapsRestartsAndSnapshots) {
  std::mt19937 rng(7);
  const auto chains = MakeChains(40, 12, &rng);
  constexpr int kWorkers = 5;
  KvIndex index;
  Naive truth;  // what each worker really holds
  std::vector<uint64_t> epoch(kWorkers), seq(kWorkers, 0);
  for (int w = 0; w < kWorkers; ++w) {
    epoch[w] = 100 + w;
    index.ApplySnapshot(w, SnapshotOf({}, epoch[w], 0));
    truth[w];
  }
  int gaps = 0, restarts = 0;
  // A worker whose missed batch or restart the index has not noticed yet: its entries are
  // stale until the next batch asks for a snapshot, so the comparison skips it.
  std::set<WorkerId> behind;
  int checks = 0;
  for (int step = 0; step < 4000; ++step) {
    const WorkerId w = static_cast<WorkerId>(rng() % kWorkers);
    const auto& chain = chains[rng() % chains.size()];
    KvEventBatch batch;
    batch.epoch = epoch[w];
    batch.block_size = 4;
    KvEvent e;
    const int kind = static_cast<int>(rng() % 100);
    if (kind < 55) {  // store a chain's prefix
      e.type = KvEvent::Type::kBlockStored;
      const size_t n = 1 + rng() % chain.size();
      for (size_t i = 0; i < n; ++i) {
        if (truth[w].insert(chain[i]).second) e.block_hashes.push_back(chain[i]);
      }
    } else if (kind < 90) {  // evict a chain's tail
      e.type = KvEvent::Type::kBlockRemoved;
      for (size_t i = rng() % chain.size(); i < chain.size(); ++i) {
        if (truth[w].erase(chain[i]) > 0) e.block_hashes.push_back(chain[i]);
      }
    } else if (kind < 93) {
      e.type = KvEvent::Type::kAllCleared;
      truth[w].clear();
    } else if (kind < 97) {  // the router misses this batch
      e.type = KvEvent::Type::kBlockRemoved;
      for (const BlockHash& h : chain) {
        if (truth[w].erase(h) > 0) e.block_hashes.push_back(h);
      }
      ++seq[w];
      ++gaps;
      behind.insert(w);
      continue;
    } else {  // the worker restarts: a new epoch with an empty cache
      ++epoch[w];
      seq[w] = 0;
      truth[w].clear();
      ++restarts;
      behind.insert(w);
      continue;
    }
    batch.sequence = ++seq[w];
    batch.events.push_back(e);
    const KvIndex::Applied got = index.ApplyBatch(w, batch);
    if (got == KvIndex::Applied::kNeedsSnapshot) {
      index.ApplySnapshot(w, SnapshotOf(truth[w], epoch[w], seq[w]));
      // The batch was already in the snapshot: applying it again is stale, not a change.
      EXPECT_EQ(index.ApplyBatch(w, batch), KvIndex::Applied::kStale);
    } else {
      ASSERT_EQ(got, KvIndex::Applied::kApplied);
    }
    ASSERT_TRUE(index.sync(w).synced);
    behind.erase(w);
    if (step % 50 == 0 && behind.empty()) {
      ++checks;
      for (const auto& q : chains) ASSERT_EQ(IndexMatch(index, q), NaiveMatch(truth, q));
      int64_t entries = 0;
      for (const auto& [id, held] : truth) entries += static_cast<int64_t>(held.size());
      ASSERT_EQ(index.num_entries(), entries);
    }
  }
  EXPECT_GT(checks, 20);
  EXPECT_GT(gaps, 50);
  EXPECT_GT(restarts, 20);
  int64_t gaps_seen = 0;
  for (int w = 0; w < kWorkers; ++w) gaps_seen += index.sync(w).gaps;
  EXPECT_GT(gaps_seen, 0);
}

TEST(KvIndexTest, DetectsGapsNewEpochsAndStaleBatches) {
  KvIndex index;
  KvEventBatch b;
  b.epoch = 9;
  b.sequence = 1;
  EXPECT_EQ(index.ApplyBatch(0, b), KvIndex::Applied::kNeedsSnapshot) << "never synced";
  index.ApplySnapshot(0, SnapshotOf({}, 9, 3));
  b.sequence = 3;
  EXPECT_EQ(index.ApplyBatch(0, b), KvIndex::Applied::kStale);
  b.sequence = 4;
  EXPECT_EQ(index.ApplyBatch(0, b), KvIndex::Applied::kApplied);
  b.sequence = 6;
  EXPECT_EQ(index.ApplyBatch(0, b), KvIndex::Applied::kNeedsSnapshot) << "5 is missing";
  b.sequence = 5;
  EXPECT_EQ(index.ApplyBatch(0, b), KvIndex::Applied::kNeedsSnapshot)
      << "stays unsynced until a snapshot";
  index.ApplySnapshot(0, SnapshotOf({}, 9, 6));
  b.epoch = 10;
  b.sequence = 7;
  EXPECT_EQ(index.ApplyBatch(0, b), KvIndex::Applied::kNeedsSnapshot) << "a restarted worker";
  EXPECT_EQ(index.sync(0).gaps, 4);
  EXPECT_EQ(index.sync(0).snapshots, 2);
}

TEST(KvIndexTest, SnapshotReplacesWhatAWorkerHeldAndForgetDropsIt) {
  std::mt19937 rng(3);
  const auto chains = MakeChains(2, 6, &rng);
  KvIndex index;
  std::set<BlockHash> a(chains[0].begin(), chains[0].end());
  index.ApplySnapshot(1, SnapshotOf(a, 1, 0));
  index.ApplySnapshot(2, SnapshotOf(a, 1, 0));
  EXPECT_EQ(index.num_blocks(), 6);
  EXPECT_EQ(index.num_entries(), 12);
  std::set<BlockHash> b(chains[0].begin(), chains[0].begin() + 2);
  index.ApplySnapshot(1, SnapshotOf(b, 1, 5));
  auto m = IndexMatch(index, chains[0]);
  EXPECT_EQ(m[1], 2);
  EXPECT_EQ(m[2], 6);
  index.ForgetWorker(2);
  m = IndexMatch(index, chains[0]);
  EXPECT_EQ(m.size(), 1u);
  EXPECT_EQ(index.num_entries(), 2);
  EXPECT_FALSE(index.sync(2).synced);
  EXPECT_GT(index.MemoryBytes(), 0);
}

TEST(KvIndexTest, ApproximateEntriesExpireUnlessRenewed) {
  std::mt19937 rng(5);
  const auto chains = MakeChains(2, 8, &rng);
  KvIndex index(absl::Seconds(10));
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  index.Remember(0, chains[0], t0);
  index.Remember(1, std::span(chains[0]).first(3), t0 + absl::Seconds(5));
  auto m = IndexMatch(index, chains[0]);
  EXPECT_EQ(m[0], 8);
  EXPECT_EQ(m[1], 3);
  index.Remember(0, std::span(chains[0]).first(2), t0 + absl::Seconds(8));  // renew 2 blocks
  index.Expire(t0 + absl::Seconds(11));
  m = IndexMatch(index, chains[0]);
  EXPECT_EQ(m[0], 2) << "the unrenewed blocks expired";
  EXPECT_EQ(m[1], 3);
  index.Expire(t0 + absl::Seconds(19));
  m = IndexMatch(index, chains[0]);
  EXPECT_FALSE(m.contains(0));
  EXPECT_FALSE(m.contains(1));
  EXPECT_EQ(index.num_entries(), 0);
  // A snapshot makes approximate entries exact: they no longer expire.
  index.Remember(3, chains[1], t0);
  index.ApplySnapshot(3, SnapshotOf({chains[1][0]}, 1, 0));
  index.Expire(t0 + absl::Hours(1));
  EXPECT_EQ(IndexMatch(index, chains[1])[3], 1);
}

TEST(KvIndexTest, WithoutATtlRememberedEntriesStayAndQueueNothing) {
  std::mt19937 rng(9);
  const auto chains = MakeChains(1, 8, &rng);
  KvIndex index(absl::InfiniteDuration());
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  index.Remember(0, chains[0], t0);
  const int64_t bytes = index.MemoryBytes();
  // Placing the same prompt again and again (what a long-running router does) must not
  // grow the index: there is no expiry queue to fill.
  for (int i = 1; i <= 1000; ++i) index.Remember(0, chains[0], t0 + absl::Seconds(i));
  EXPECT_EQ(index.MemoryBytes(), bytes);
  index.Expire(t0 + absl::Hours(24 * 365 * 1000));
  EXPECT_EQ(IndexMatch(index, chains[0])[0], 8);
}

TEST(KvIndexTest, ABoundedTreeDropsTheLeastRecentlyUsedLeavesFirst) {
  std::mt19937 rng(13);
  // Prompts of 8 blocks; the first four share their first 4 blocks (MakeChains' groups).
  const auto chains = MakeChains(40, 8, &rng);
  KvIndex index(absl::InfiniteDuration(), /*max_blocks_per_worker=*/64);
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  for (int i = 0; i < 40; ++i) {
    index.Remember(0, chains[i], t0);
    EXPECT_LE(index.worker_blocks(0), 64 + 64 / 8) << "after prompt " << i;
    // Prompt 0 stays hot: it is placed again every time.
    index.Remember(0, chains[0], t0);
    EXPECT_EQ(IndexMatch(index, chains[0])[0], 8) << "the hot prompt is never pruned";
  }
  EXPECT_EQ(IndexMatch(index, chains[39])[0], 8) << "the newest prompt is whole";
  // An old cold prompt keeps at most the 4 blocks its group shares with newer prompts.
  EXPECT_LE(IndexMatch(index, chains[5])[0], 4) << "its own blocks are gone";
  // Whatever survives of a prompt is a prefix of it: pruning trims from the leaves.
  const auto held = [&index](const BlockHash& h) {
    std::vector<PrefixMatch> m;
    index.MatchPrefix(std::span(&h, 1), &m);
    return !m.empty();
  };
  int partial = 0;
  for (const auto& chain : chains) {
    for (size_t b = 1; b < chain.size(); ++b) {
      if (held(chain[b])) EXPECT_TRUE(held(chain[b - 1])) << "a block survived its parent";
    }
    partial += held(chain[0]) && !held(chain[7]);
  }
  EXPECT_GT(partial, 0) << "some prompts were trimmed, not dropped whole";
  EXPECT_EQ(index.worker_blocks(1), 0);
}

TEST(KvIndexTest, TheBoundIsPerWorker) {
  std::mt19937 rng(17);
  const auto chains = MakeChains(30, 8, &rng);
  KvIndex index(absl::InfiniteDuration(), 40);
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  for (int i = 0; i < 30; ++i) index.Remember(i % 2, chains[i], t0);
  EXPECT_LE(index.worker_blocks(0), 45);
  EXPECT_LE(index.worker_blocks(1), 45);
  EXPECT_GE(index.worker_blocks(0), 40);
  // With a TTL the bound does not apply: age does the pruning.
  KvIndex aging(absl::Seconds(60), 40);
  for (int i = 0; i < 30; ++i) aging.Remember(0, chains[i], t0);
  EXPECT_GT(aging.worker_blocks(0), 45);
}

}  // namespace
}  // namespace baton::routing
