// Page bookkeeping over a KvPool: reference counts, the prefix cache and its events.
//
// A page is in one of three states:
//   - free: unreferenced and holding nothing reusable;
//   - in use: referenced by one or more sequences' block tables;
//   - cached and idle: unreferenced, but holding a full block whose hash is in the prefix
//     cache. It stays until a page is needed; then the least recently released one is
//     evicted (BlockRemoved).
// Only full blocks are cached and shared; a sequence's partial last block is private.
//
// Single-threaded: the engine thread owns it. Events leave through Flush().
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "kvcache/block_hash.h"
#include "kvcache/kv_events.h"

namespace baton::kvcache {

struct PrefixCacheCounters {
  int64_t queried_tokens = 0;  // prompt tokens looked up
  int64_t hit_tokens = 0;      // of which were found cached
};

class BlockManager {
 public:
  // `events` may be null (no subscribers); it must outlive the manager.
  BlockManager(int64_t num_blocks, bool enable_prefix_cache, kvcache::KvEventPublisher* events);

  int64_t num_blocks() const { return static_cast<int64_t>(ref_.size()); }
  // Pages an Allocate could hand out now: free plus cached-and-idle.
  int64_t num_available() const { return num_free_ + num_idle_; }
  int64_t num_in_use() const { return num_blocks() - num_available(); }
  int64_t num_cached() const { return static_cast<int64_t>(by_hash_.size()); }
  bool prefix_cache_enabled() const { return enabled_; }

  // How many of `hashes`, from the first, are cached. Changes nothing.
  int64_t CountCachedPrefix(std::span<const kvcache::BlockHash> hashes) const;
  // Of the first n cached blocks of `hashes`, how many are idle (Acquire would take them
  // out of the available count).
  int64_t CountIdle(std::span<const kvcache::BlockHash> hashes, int64_t n) const;
  // References the cached blocks of hashes[0, n) (n <= CountCachedPrefix) and returns
  // their pages.
  std::vector<int32_t> AcquireCached(std::span<const kvcache::BlockHash> hashes, int64_t n);

  // A page with reference count 1: a free one, else the least recently released cached
  // one (evicted). ResourceExhausted when every page is in use.
  absl::StatusOr<int32_t> Allocate();

  // Drops one reference. At zero the page becomes idle if it is cached, free otherwise.
  // Release a sequence's pages last to first, so that the ends of prefixes are evicted
  // before their starts.
  void Release(int32_t block);

  // Records that `block` (in use) now holds the full block `hash`, chained from
  // `parent`, with `tokens`. If another page already holds that hash, nothing changes and
  // `block` stays private. Returns whether the block joined the cache.
  bool Store(int32_t block, const kvcache::BlockHash& hash, const kvcache::BlockHash& parent,
             std::span<const int32_t> tokens);

  // Empties the prefix cache. FailedPrecondition while any cached block is in use.
  absl::Status ResetPrefixCache();

  void CountLookup(int64_t queried_tokens, int64_t hit_tokens);
  const PrefixCacheCounters& counters() const { return counters_; }

  // Publishes the events gathered since the last Flush as one batch.
  void Flush();

  int32_t ref_count(int32_t block) const { return ref_[block]; }

 private:
  static constexpr int32_t kNone = -1;
  void LinkIdle(int32_t block);  // append to the LRU tail
  void UnlinkIdle(int32_t block);
  void Uncache(int32_t block);

  bool enabled_;
  kvcache::KvEventPublisher* events_;
  std::vector<int32_t> ref_;
  std::vector<int32_t> free_;  // stack of free pages
  int64_t num_free_ = 0;
  int64_t num_idle_ = 0;
  // Idle cached pages, least recently released first: an intrusive list.
  std::vector<int32_t> prev_, next_;
  int32_t lru_head_ = kNone, lru_tail_ = kNone;
  std::vector<bool> cached_;
  std::vector<kvcache::BlockHash> hash_of_;
  absl::flat_hash_map<kvcache::BlockHash, int32_t> by_hash_;
  PrefixCacheCounters counters_;
  std::vector<kvcache::KvEvent> pending_;
};

}  // namespace baton::kvcache
