#include "routing/kv_index.h"

#include <algorithm>
#include <mutex>

#include "common/check.h"

namespace baton::routing {

KvIndex::KvIndex(absl::Duration ttl, int64_t max_blocks_per_worker)
    : ttl_ns_(ttl == absl::InfiniteDuration() ? kForever : absl::ToInt64Nanoseconds(ttl)),
      max_blocks_(ttl == absl::InfiniteDuration() ? std::max<int64_t>(0, max_blocks_per_worker)
                                                  : 0) {}

KvIndex::Key KvIndex::KeyOf(const kvcache::BlockHash& h) {
  Key k = 0;
  for (int i = 0; i < 8; ++i) k = (k << 8) | h.bytes[i];
  return k;
}

KvIndex::Worker& KvIndex::SlotLocked(WorkerId worker) {
  BATON_CHECK(worker >= 0 && worker < kMaxIndexedWorkers);
  if (static_cast<size_t>(worker) >= workers_.size()) workers_.resize(worker + 1);
  return workers_[worker];
}

void KvIndex::AddLocked(WorkerId worker, Key key, int64_t expiry) {
  auto [it, inserted] = workers_[worker].blocks.try_emplace(key, expiry);
  if (!inserted) {
    it->second = std::max(it->second, expiry);
    return;
  }
  holders_[key].push_back(static_cast<uint16_t>(worker));
  ++entries_;
}

void KvIndex::RemoveLocked(WorkerId worker, Key key) {
  if (workers_[worker].blocks.erase(key) == 0) return;
  auto it = holders_.find(key);
  BATON_CHECK(it != holders_.end());
  Holders& h = it->second;
  h.erase(std::find(h.begin(), h.end(), static_cast<uint16_t>(worker)));
  if (h.empty()) holders_.erase(it);
  --entries_;
}

void KvIndex::ClearLocked(WorkerId worker) {
  Worker& w = workers_[worker];
  for (const auto& [key, expiry] : w.blocks) {
    auto it = holders_.find(key);
    Holders& h = it->second;
    h.erase(std::find(h.begin(), h.end(), static_cast<uint16_t>(worker)));
    if (h.empty()) holders_.erase(it);
  }
  entries_ -= static_cast<int64_t>(w.blocks.size());
  w.blocks = {};  // give the memory back: a restarted worker starts small
}

void KvIndex::ApplySnapshot(WorkerId worker, const kvcache::KvSnapshot& snapshot) {
  std::unique_lock lock(mu_);
  Worker& w = SlotLocked(worker);
  // Replace, not merge: what the snapshot lacks was evicted while we were not looking.
  absl::flat_hash_map<Key, int64_t> keep;
  keep.reserve(snapshot.block_hashes.size());
  for (const kvcache::BlockHash& h : snapshot.block_hashes) keep.emplace(KeyOf(h), kForever);
  std::vector<Key> gone;
  for (const auto& [key, expiry] : w.blocks) {
    if (!keep.contains(key)) gone.push_back(key);
  }
  for (Key k : gone) RemoveLocked(worker, k);
  // Approximate entries the snapshot confirms become exact (AddLocked keeps the later expiry).
  for (const auto& [key, expiry] : keep) AddLocked(worker, key, kForever);
  w.sync.synced = true;
  w.sync.epoch = snapshot.epoch;
  w.sync.sequence = snapshot.sequence;
  ++w.sync.snapshots;
}

KvIndex::Applied KvIndex::ApplyBatch(WorkerId worker, const kvcache::KvEventBatch& batch) {
  std::unique_lock lock(mu_);
  Worker& w = SlotLocked(worker);
  if (w.sync.synced && batch.epoch == w.sync.epoch && batch.sequence <= w.sync.sequence) {
    return Applied::kStale;
  }
  if (!w.sync.synced || batch.epoch != w.sync.epoch || batch.sequence != w.sync.sequence + 1) {
    w.sync.synced = false;
    ++w.sync.gaps;
    return Applied::kNeedsSnapshot;
  }
  for (const kvcache::KvEvent& e : batch.events) {
    switch (e.type) {
      case kvcache::KvEvent::Type::kBlockStored:
        for (const kvcache::BlockHash& h : e.block_hashes) AddLocked(worker, KeyOf(h), kForever);
        break;
      case kvcache::KvEvent::Type::kBlockRemoved:
        for (const kvcache::BlockHash& h : e.block_hashes) RemoveLocked(worker, KeyOf(h));
        break;
      case kvcache::KvEvent::Type::kAllCleared:
        ClearLocked(worker);
        break;
    }
  }
  w.sync.sequence = batch.sequence;
  return Applied::kApplied;
}

void KvIndex::ForgetWorker(WorkerId worker) {
  std::unique_lock lock(mu_);
  Worker& w = SlotLocked(worker);
  ClearLocked(worker);
  w.sync.synced = false;
}

void KvIndex::Remember(WorkerId worker, std::span<const kvcache::BlockHash> hashes,
                       absl::Time now) {
  const int64_t now_ns = absl::ToUnixNanos(now);
  // Without a TTL nothing expires, and nothing needs to be queued for expiry.
  const bool forever = ttl_ns_ == kForever;
  const int64_t expiry = forever ? kForever : now_ns + ttl_ns_;
  std::unique_lock lock(mu_);
  SlotLocked(worker);
  ExpireLocked(now_ns);
  if (max_blocks_ > 0) {
    // A prompt's deeper blocks count as used earlier, so that pruning trims from the leaves.
    const auto n = static_cast<int64_t>(hashes.size());
    for (int64_t i = 0; i < n; ++i) AddLocked(worker, KeyOf(hashes[i]), lru_clock_ + n - i);
    lru_clock_ += n + 1;
    PruneLocked(worker);
    return;
  }
  for (const kvcache::BlockHash& h : hashes) {
    const Key k = KeyOf(h);
    AddLocked(worker, k, expiry);
    if (!forever) due_.push_back({expiry, worker, k});
  }
}

void KvIndex::PruneLocked(WorkerId worker) {
  const auto& blocks = workers_[worker].blocks;
  const auto size = static_cast<int64_t>(blocks.size());
  // The slack makes pruning O(1) per remembered block, amortized.
  if (size <= max_blocks_ + max_blocks_ / 8) return;
  std::vector<std::pair<int64_t, Key>> by_use;
  by_use.reserve(blocks.size());
  for (const auto& [key, used] : blocks) by_use.emplace_back(used, key);
  const int64_t drop = size - max_blocks_;
  std::nth_element(by_use.begin(), by_use.begin() + drop, by_use.end());
  for (int64_t i = 0; i < drop; ++i) RemoveLocked(worker, by_use[i].second);
}

void KvIndex::Expire(absl::Time now) {
  std::unique_lock lock(mu_);
  ExpireLocked(absl::ToUnixNanos(now));
}

void KvIndex::ExpireLocked(int64_t now_ns) {
  while (!due_.empty() && due_.front().at_ns <= now_ns) {
    const Due d = due_.front();
    due_.pop_front();
    auto it = workers_[d.worker].blocks.find(d.key);
    // Renewed (a later due entry exists) or made exact by a snapshot: keep it.
    if (it != workers_[d.worker].blocks.end() && it->second <= now_ns) {
      RemoveLocked(d.worker, d.key);
    }
  }
}

void KvIndex::MatchPrefix(std::span<const kvcache::BlockHash> hashes,
                          std::vector<PrefixMatch>* out) const {
  out->clear();
  if (hashes.empty()) return;
  std::shared_lock lock(mu_);
  auto first = holders_.find(KeyOf(hashes[0]));
  if (first == holders_.end()) return;
  for (uint16_t w : first->second) out->push_back({w, 1});
  // Candidates still matching occupy out[0, live); each block narrows them.
  size_t live = out->size();
  for (size_t i = 1; i < hashes.size() && live > 0; ++i) {
    auto it = holders_.find(KeyOf(hashes[i]));
    if (it == holders_.end()) break;
    const Holders& h = it->second;
    for (size_t j = 0; j < live;) {
      if (std::find(h.begin(), h.end(), static_cast<uint16_t>((*out)[j].worker)) != h.end()) {
        ++(*out)[j].blocks;
        ++j;
      } else {
        std::swap((*out)[j], (*out)[live - 1]);
        --live;
      }
    }
  }
}

WorkerSync KvIndex::sync(WorkerId worker) const {
  std::shared_lock lock(mu_);
  if (worker < 0 || static_cast<size_t>(worker) >= workers_.size()) return {};
  return workers_[worker].sync;
}

int64_t KvIndex::worker_blocks(WorkerId worker) const {
  std::shared_lock lock(mu_);
  if (worker < 0 || static_cast<size_t>(worker) >= workers_.size()) return 0;
  return static_cast<int64_t>(workers_[worker].blocks.size());
}

int64_t KvIndex::num_blocks() const {
  std::shared_lock lock(mu_);
  return static_cast<int64_t>(holders_.size());
}

int64_t KvIndex::num_entries() const {
  std::shared_lock lock(mu_);
  return entries_;
}

int64_t KvIndex::MemoryBytes() const {
  std::shared_lock lock(mu_);
  // A flat_hash_map slot is its value type plus one control byte; inlined holder lists
  // that spilled to the heap are not counted (a block on more than three workers).
  auto table = [](size_t capacity, size_t slot) {
    return static_cast<int64_t>(capacity * (slot + 1));
  };
  int64_t bytes = table(holders_.capacity(), sizeof(std::pair<Key, Holders>));
  for (const Worker& w : workers_) {
    bytes += table(w.blocks.capacity(), sizeof(std::pair<Key, int64_t>));
  }
  bytes += static_cast<int64_t>(due_.size() * sizeof(Due));
  return bytes;
}

}  // namespace baton::routing
