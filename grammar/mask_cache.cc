#include "grammar/mask_cache.h"

#include <algorithm>

#include "absl/hash/hash.h"

namespace baton::grammar {

MaskCache::Shard& MaskCache::ShardFor(std::string_view key) const {
  return shards_[absl::HashOf(absl::string_view(key.data(), key.size())) % kShards];
}

bool MaskCache::Lookup(std::string_view key, std::span<uint32_t> out) const {
  Shard& s = ShardFor(key);
  absl::MutexLock lock(&s.mu);
  auto it = s.masks.find(absl::string_view(key.data(), key.size()));
  if (it == s.masks.end() || it->second.size() != out.size()) {
    misses_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  std::copy(it->second.begin(), it->second.end(), out.begin());
  hits_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void MaskCache::Insert(std::string_view key, std::span<const uint32_t> mask) const {
  const size_t entry = key.size() + 4 * mask.size() + 64;
  if (entry > shard_bytes_) return;
  Shard& s = ShardFor(key);
  absl::MutexLock lock(&s.mu);
  if (s.masks.contains(absl::string_view(key.data(), key.size()))) return;
  if (s.bytes + entry > shard_bytes_) {
    s.masks.clear();
    s.bytes = 0;
  }
  s.masks.emplace(std::string(key), std::vector<uint32_t>(mask.begin(), mask.end()));
  s.bytes += entry;
}

}  // namespace baton::grammar
