// Token masks by matcher state (GrammarMatcher's canonical stack key), shared by every
// sequence on a TokenGrammar. String contents and repeated array items bring a sequence
// back to the same state again and again, and concurrent sequences with one schema walk
// the same states, so most steps are a lookup and a copy. Sharded to keep lock holds
// short; each shard is bounded in bytes and cleared when full (a miss only costs a
// recomputation, and clearing keeps the bookkeeping out of the hit path).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace baton::grammar {

class MaskCache {
 public:
  explicit MaskCache(size_t max_bytes) : shard_bytes_(max_bytes / kShards) {}

  // Copies the cached mask into `out` (its size) and returns true, or returns false.
  bool Lookup(std::string_view key, std::span<uint32_t> out) const;
  void Insert(std::string_view key, std::span<const uint32_t> mask) const;

  size_t hits() const { return hits_.load(std::memory_order_relaxed); }
  size_t misses() const { return misses_.load(std::memory_order_relaxed); }

 private:
  static constexpr size_t kShards = 16;
  struct Shard {
    mutable absl::Mutex mu;
    absl::flat_hash_map<std::string, std::vector<uint32_t>> masks ABSL_GUARDED_BY(mu);
    size_t bytes ABSL_GUARDED_BY(mu) = 0;
  };
  Shard& ShardFor(std::string_view key) const;

  size_t shard_bytes_;
  mutable std::array<Shard, kShards> shards_;
  mutable std::atomic<size_t> hits_{0}, misses_{0};
};

}  // namespace baton::grammar
