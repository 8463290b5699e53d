// The router's KV index: which blocks each worker's prefix cache holds, so that a request
// can be sent where its prompt's prefix is already computed (docs/routing.md).
//
// Exact mode follows each worker's KV event stream (kvcache/kv_events.h): batches are
// applied in sequence order, and a gap, a new epoch or a reconnect asks for a snapshot.
// Approximate mode is for workers without events: the router remembers the blocks of
// every prompt it sent there, and forgets them after a TTL (the worker's LRU will have
// evicted them by then, or they were hot enough to be sent again, which renews them).
//
//   KvIndex index;
//   index.ApplySnapshot(w, snapshot);
//   if (index.ApplyBatch(w, batch) == KvIndex::Applied::kNeedsSnapshot) ...
//   index.MatchPrefix(prompt_hashes, &matches);  // per worker: leading blocks it holds
//
// Blocks are keyed by the first 64 bits of their SHA-256 chain hash. Since a chain hash
// names the whole prefix, a per-block hash index answers prefix queries exactly; 64 bits
// keep a 1M-block index at a third of the memory, and a collision (odds ~1e-7 at 1M
// blocks) can only misplace a request, never corrupt one: the worker checks full hashes.
//
// Thread-safe: writers (event subscribers, the router recording approximate entries)
// take an exclusive lock, MatchPrefix a shared one.
#pragma once

#include <cstdint>
#include <deque>
#include <shared_mutex>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/time/time.h"
#include "kvcache/block_hash.h"
#include "kvcache/kv_events.h"

namespace baton::routing {

// A worker's slot in the index: small and dense (the registry's order).
using WorkerId = int32_t;
inline constexpr WorkerId kMaxIndexedWorkers = 4096;

struct PrefixMatch {
  WorkerId worker = 0;
  int64_t blocks = 0;  // leading blocks of the query the worker holds, at least 1
};

// Where one worker's event stream stands.
struct WorkerSync {
  bool synced = false;  // a snapshot has been applied and no gap seen since
  uint64_t epoch = 0;
  uint64_t sequence = 0;  // the last batch applied
  int64_t gaps = 0;       // batches that asked for a snapshot
  int64_t snapshots = 0;  // snapshots applied
};

class KvIndex {
 public:
  enum class Applied {
    kApplied,
    kStale,          // at or before the last applied sequence: ignored
    kNeedsSnapshot,  // not synced, another epoch, or a gap: nothing was applied
  };

  // `ttl` bounds how long an approximate entry lives without being renewed;
  // absl::InfiniteDuration(): entries live until removed. With an infinite TTL,
  // `max_blocks_per_worker` (> 0) bounds each worker's approximate entries instead: past it
  // (and 1/8 of slack), the least recently remembered go, the deepest blocks of a prompt
  // first, so that what stays is still a prefix. SGLang prunes its trees this way.
  explicit KvIndex(absl::Duration ttl = absl::Minutes(2), int64_t max_blocks_per_worker = 0);

  // Exact mode. The worker's blocks become exactly the snapshot's.
  void ApplySnapshot(WorkerId worker, const kvcache::KvSnapshot& snapshot);
  Applied ApplyBatch(WorkerId worker, const kvcache::KvEventBatch& batch);
  // Everything the worker held is gone (it restarted, or left the pool); unsynced.
  void ForgetWorker(WorkerId worker);

  // Approximate mode: `worker` will hold `hashes` (a prompt's full blocks) until `now +
  // ttl`. Renews blocks it already holds. Also expires what is due at `now`.
  void Remember(WorkerId worker, std::span<const kvcache::BlockHash> hashes, absl::Time now);
  void Expire(absl::Time now);

  // For every worker holding hashes[0]: how many leading blocks of `hashes` it holds.
  // `out` is overwritten, in no particular order.
  void MatchPrefix(std::span<const kvcache::BlockHash> hashes, std::vector<PrefixMatch>* out) const;

  WorkerSync sync(WorkerId worker) const;
  int64_t worker_blocks(WorkerId worker) const;
  int64_t num_blocks() const;   // distinct blocks held by any worker
  int64_t num_entries() const;  // (worker, block) pairs
  // An estimate of the heap the index uses, from its tables' capacities.
  int64_t MemoryBytes() const;

 private:
  using Key = uint64_t;
  // Who holds a block: most blocks live on one or two workers.
  using Holders = absl::InlinedVector<uint16_t, 3>;
  static constexpr int64_t kForever = INT64_MAX;

  struct Worker {
    absl::flat_hash_map<Key, int64_t> blocks;  // block -> expiry (unix ns), kForever if exact
    WorkerSync sync;
  };

  static Key KeyOf(const kvcache::BlockHash& h);
  Worker& SlotLocked(WorkerId worker);
  void AddLocked(WorkerId worker, Key key, int64_t expiry);
  void RemoveLocked(WorkerId worker, Key key);
  void ClearLocked(WorkerId worker);
  void ExpireLocked(int64_t now_ns);
  void PruneLocked(WorkerId worker);

  const int64_t ttl_ns_;
  const int64_t max_blocks_;  // per worker, with an infinite TTL; 0: no bound
  // With max_blocks_, an entry's value is its last use on this clock (not an expiry).
  int64_t lru_clock_ = 0;
  mutable std::shared_mutex mu_;
  absl::flat_hash_map<Key, Holders> holders_;
  std::vector<Worker> workers_;
  int64_t entries_ = 0;
  struct Due {
    int64_t at_ns;
    WorkerId worker;
    Key key;
  };
  std::deque<Due> due_;  // approximate entries in expiry order (the TTL is fixed)
};

}  // namespace baton::routing
