#include "kvcache/block_manager.h"

#include <utility>

#include "common/check.h"
#include "common/strings.h"

namespace baton::kvcache {

BlockManager::BlockManager(int64_t num_blocks, bool enable_prefix_cache,
                           kvcache::KvEventPublisher* events)
    : enabled_(enable_prefix_cache),
      events_(events),
      ref_(num_blocks, 0),
      prev_(num_blocks, kNone),
      next_(num_blocks, kNone),
      cached_(num_blocks, false),
      hash_of_(num_blocks) {
  BATON_CHECK(num_blocks > 0 && num_blocks < (int64_t{1} << 31));
  free_.reserve(num_blocks);
  // Page 0 on top of the stack: pages are handed out in ascending order at first.
  for (int64_t b = num_blocks - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));
  num_free_ = num_blocks;
}

int64_t BlockManager::CountCachedPrefix(std::span<const kvcache::BlockHash> hashes) const {
  if (!enabled_) return 0;
  int64_t n = 0;
  for (const kvcache::BlockHash& h : hashes) {
    if (!by_hash_.contains(h)) break;
    ++n;
  }
  return n;
}

int64_t BlockManager::CountIdle(std::span<const kvcache::BlockHash> hashes, int64_t n) const {
  int64_t idle = 0;
  for (int64_t i = 0; i < n; ++i) {
    auto it = by_hash_.find(hashes[i]);
    BATON_CHECK(it != by_hash_.end());
    if (ref_[it->second] == 0) ++idle;
  }
  return idle;
}

std::vector<int32_t> BlockManager::AcquireCached(std::span<const kvcache::BlockHash> hashes,
                                                 int64_t n) {
  std::vector<int32_t> blocks;
  blocks.reserve(n);
  for (int64_t i = 0; i < n; ++i) {
    auto it = by_hash_.find(hashes[i]);
    BATON_CHECK(it != by_hash_.end());
    const int32_t b = it->second;
    if (ref_[b]++ == 0) {
      UnlinkIdle(b);
      --num_idle_;
    }
    blocks.push_back(b);
  }
  return blocks;
}

absl::StatusOr<int32_t> BlockManager::Allocate() {
  int32_t b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
    --num_free_;
  } else if (lru_head_ != kNone) {
    b = lru_head_;
    UnlinkIdle(b);
    --num_idle_;
    Uncache(b);
  } else {
    return absl::ResourceExhaustedError(
        StrCat("all ", num_blocks(), " KV pages are in use; raise the KV cache memory"));
  }
  BATON_CHECK(ref_[b] == 0);
  ref_[b] = 1;
  return b;
}

void BlockManager::Release(int32_t block) {
  BATON_CHECK(block >= 0 && block < num_blocks() && ref_[block] > 0);
  if (--ref_[block] > 0) return;
  if (cached_[block]) {
    LinkIdle(block);
    ++num_idle_;
  } else {
    free_.push_back(block);
    ++num_free_;
  }
}

bool BlockManager::Store(int32_t block, const kvcache::BlockHash& hash,
                         const kvcache::BlockHash& parent, std::span<const int32_t> tokens) {
  BATON_CHECK(ref_[block] > 0);
  if (!enabled_ || cached_[block] || by_hash_.contains(hash)) return false;
  cached_[block] = true;
  hash_of_[block] = hash;
  by_hash_.emplace(hash, block);
  // A block that continues the chain of the previous Stored event joins it.
  if (!pending_.empty() && pending_.back().type == kvcache::KvEvent::Type::kBlockStored &&
      pending_.back().block_hashes.back() == parent) {
    pending_.back().block_hashes.push_back(hash);
    pending_.back().token_ids.insert(pending_.back().token_ids.end(), tokens.begin(), tokens.end());
  } else {
    kvcache::KvEvent e;
    e.type = kvcache::KvEvent::Type::kBlockStored;
    e.block_hashes.push_back(hash);
    e.parent_hash = parent;
    e.token_ids.assign(tokens.begin(), tokens.end());
    pending_.push_back(std::move(e));
  }
  return true;
}

void BlockManager::Uncache(int32_t block) {
  BATON_CHECK(cached_[block]);
  cached_[block] = false;
  by_hash_.erase(hash_of_[block]);
  if (pending_.empty() || pending_.back().type != kvcache::KvEvent::Type::kBlockRemoved) {
    pending_.emplace_back().type = kvcache::KvEvent::Type::kBlockRemoved;
  }
  pending_.back().block_hashes.push_back(hash_of_[block]);
}

absl::Status BlockManager::ResetPrefixCache() {
  for (const auto& [hash, block] : by_hash_) {
    if (ref_[block] > 0) {
      return absl::FailedPreconditionError(
          "cannot reset the prefix cache while running requests use cached blocks; retry "
          "when the engine is idle");
    }
  }
  while (lru_head_ != kNone) {
    const int32_t b = lru_head_;
    UnlinkIdle(b);
    --num_idle_;
    cached_[b] = false;
    free_.push_back(b);
    ++num_free_;
  }
  by_hash_.clear();
  pending_.emplace_back().type = kvcache::KvEvent::Type::kAllCleared;
  return absl::OkStatus();
}

void BlockManager::CountLookup(int64_t queried_tokens, int64_t hit_tokens) {
  counters_.queried_tokens += queried_tokens;
  counters_.hit_tokens += hit_tokens;
}

void BlockManager::Flush() {
  if (pending_.empty()) return;
  if (events_ != nullptr) events_->Publish(std::move(pending_));
  pending_.clear();
}

void BlockManager::LinkIdle(int32_t block) {
  prev_[block] = lru_tail_;
  next_[block] = kNone;
  if (lru_tail_ != kNone) {
    next_[lru_tail_] = block;
  } else {
    lru_head_ = block;
  }
  lru_tail_ = block;
}

void BlockManager::UnlinkIdle(int32_t block) {
  const int32_t p = prev_[block], n = next_[block];
  if (p != kNone) {
    next_[p] = n;
  } else {
    lru_head_ = n;
  }
  if (n != kNone) {
    prev_[n] = p;
  } else {
    lru_tail_ = p;
  }
  prev_[block] = next_[block] = kNone;
}

}  // namespace baton::kvcache
