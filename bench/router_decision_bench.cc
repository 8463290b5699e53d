// The router's own cost (issue 7): how long one placement takes with a large pool and a
// full KV index, and what the index costs in memory per block.
//
//   router_decision_bench --workers 256 --blocks 1000000
//
// The index holds --blocks distinct blocks in chains of 64 (prompts of 1024 tokens), each
// chain on one worker and a quarter of them on a second. Placements are timed for prompts
// of 64 blocks, half of them extending an indexed chain. The goal is a p99 under 100 us
// at 256 workers and 1M blocks; the report gives the ratio to that limit.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "CLI/CLI.hpp"
#include "kvcache/block_hash.h"
#include "routing/kv_index.h"
#include "routing/routing_policy.h"

namespace baton::bench {
namespace {

using kvcache::BlockHash;

BlockHash RandomHash(std::mt19937_64* rng) {
  BlockHash h;
  for (size_t i = 0; i < h.bytes.size(); i += 8) {
    const uint64_t v = (*rng)();
    for (size_t j = 0; j < 8; ++j) h.bytes[i + j] = static_cast<uint8_t>(v >> (8 * j));
  }
  return h;
}

int Main(int argc, char** argv) {
  int workers = 256;
  int64_t blocks = 1'000'000;
  int decisions = 20000;
  double limit_us = 100;
  CLI::App app("Routing decision latency and KV index memory (docs/perf/routing.md)");
  app.add_option("--workers", workers, "workers in the pool")->check(CLI::Range(1, 4096));
  app.add_option("--blocks", blocks, "distinct blocks in the index")
      ->check(CLI::Range(int64_t{64}, int64_t{1} << 26));
  app.add_option("--decisions", decisions, "placements timed per policy")
      ->check(CLI::Range(1, 10000000));
  app.add_option("--limit-us", limit_us, "the p99 goal");
  CLI11_PARSE(app, argc, argv);

  constexpr int kChain = 64;
  std::mt19937_64 rng(1);
  routing::KvIndex index;
  std::vector<std::vector<BlockHash>> chains(static_cast<size_t>(blocks / kChain));
  std::fprintf(stderr, "router_decision_bench: indexing %lld blocks over %d workers...\n",
               static_cast<long long>(blocks), workers);
  for (size_t c = 0; c < chains.size(); ++c) {
    for (int b = 0; b < kChain; ++b) chains[c].push_back(RandomHash(&rng));
  }
  // Snapshots per worker: its chains' blocks, sorted.
  std::vector<kvcache::KvSnapshot> snaps(workers);
  for (size_t c = 0; c < chains.size(); ++c) {
    const int w = static_cast<int>(rng() % workers);
    snaps[w].block_hashes.insert(snaps[w].block_hashes.end(), chains[c].begin(), chains[c].end());
    if (c % 4 == 0) {
      const int w2 = static_cast<int>((w + 1 + rng() % (workers - 1 + (workers == 1))) % workers);
      snaps[w2].block_hashes.insert(snaps[w2].block_hashes.end(), chains[c].begin(),
                                    chains[c].end());
    }
  }
  for (int w = 0; w < workers; ++w) {
    std::sort(snaps[w].block_hashes.begin(), snaps[w].block_hashes.end());
    snaps[w].epoch = 1;
    index.ApplySnapshot(w, snaps[w]);
    snaps[w] = {};
  }
  const double bytes_per_block =
      static_cast<double>(index.MemoryBytes()) / static_cast<double>(index.num_blocks());

  std::vector<routing::WorkerView> views(workers);
  for (int w = 0; w < workers; ++w) {
    views[w].id = w;
    views[w].running = static_cast<int64_t>(rng() % 32);
    views[w].queued_prefill_tokens = static_cast<int64_t>(rng() % 4096);
    views[w].kv_blocks_total = 8192;
    views[w].kv_blocks_used = static_cast<int64_t>(rng() % 8192);
  }
  const routing::PoolView pool{.workers = views, .index = &index, .block_size = 16};
  std::vector<std::vector<BlockHash>> prompts(1024);
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (i % 2 == 0) {
      const auto& c = chains[rng() % chains.size()];
      prompts[i].assign(c.begin(), c.begin() + 32 + static_cast<int64_t>(rng() % 32));
    }
    while (prompts[i].size() < kChain) prompts[i].push_back(RandomHash(&rng));
  }

  std::printf("\n%d workers, %lld indexed blocks (%lld entries), %.1f bytes per block\n\n", workers,
              static_cast<long long>(index.num_blocks()),
              static_cast<long long>(index.num_entries()), bytes_per_block);
  std::printf("| policy | decision p50 us | decision p99 us | p99 / %.0f us limit |\n", limit_us);
  std::printf("|---|---|---|---|\n");
  bool ok = true;
  for (const std::string& name : routing::RoutingPolicyNames()) {
    auto policy = *routing::MakeRoutingPolicy(name);
    std::vector<double> us;
    us.reserve(decisions);
    absl::Time now = absl::FromUnixSeconds(1'000'000);
    for (int i = 0; i < decisions; ++i) {
      const auto& p = prompts[i % prompts.size()];
      routing::PlacementRequest req{
          .block_hashes = p, .prompt_tokens = kChain * 16 + 7, .session = 0, .now = now};
      now += absl::Milliseconds(5);
      const auto t0 = std::chrono::steady_clock::now();
      const auto placed = policy->Place(req, pool);
      us.push_back(
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
      if (!placed.ok()) return 2;
    }
    std::sort(us.begin(), us.end());
    const double p50 = us[us.size() / 2], p99 = us[us.size() * 99 / 100];
    std::printf("| %s | %.1f | %.1f | %.2f |\n", name.c_str(), p50, p99, p99 / limit_us);
    if (name == "baton") ok = p99 <= limit_us;
  }
  std::printf("\nbaton decision p99 %s the %.0f us goal\n", ok ? "meets" : "MISSES", limit_us);

  // Before placing, the router hashes the prompt's full blocks (SHA-256, chained) on the
  // request's thread. That cost grows with the prompt, not with the pool or the index.
  std::printf("\n| prompt tokens | hashing p50 us | hashing p99 us | per block us |\n");
  std::printf("|---|---|---|---|\n");
  const BlockHash root =
      kvcache::NamespaceHash({.model = "bench", .adapter = "", .cache_salt = ""}, 16);
  std::mt19937 token_rng(7);
  for (const int tokens : {1024, 4096, 16384}) {
    std::vector<int32_t> prompt(static_cast<size_t>(tokens));
    for (int32_t& t : prompt) t = static_cast<int32_t>(token_rng() % 128000);
    std::vector<double> us;
    for (int i = 0; i < 200; ++i) {
      prompt[0] = i;  // a new chain each time
      const auto t0 = std::chrono::steady_clock::now();
      const std::vector<BlockHash> hashes = kvcache::HashFullBlocks(root, prompt, 16);
      us.push_back(
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
      if (hashes.size() != static_cast<size_t>(tokens / 16)) return 2;
    }
    std::sort(us.begin(), us.end());
    const double p50 = us[us.size() / 2], p99 = us[us.size() * 99 / 100];
    std::printf("| %d | %.1f | %.1f | %.2f |\n", tokens, p50, p99, p50 / (tokens / 16.0));
  }
  return 0;
}

}  // namespace
}  // namespace baton::bench

int main(int argc, char** argv) { return baton::bench::Main(argc, argv); }
