// KV cache events: what a worker's prefix cache gained and lost, as an ordered stream the
// router's KV index is built from (proto/baton/internal/v1/kv_events.proto carries it).
//
// Each published batch has the pool's epoch (new on every start, so a subscriber can tell
// a restarted worker from a gap) and a sequence number that grows by one per batch. A
// subscriber that sees a gap or a new epoch takes a Snapshot and resumes after its
// sequence number.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "kvcache/block_hash.h"

namespace baton::kvcache {

struct KvEvent {
  enum class Type { kBlockStored, kBlockRemoved, kAllCleared };
  Type type = Type::kBlockStored;
  // Stored: the new blocks in chain order; removed: the blocks that left. Empty for
  // kAllCleared.
  std::vector<BlockHash> block_hashes;
  // Stored only: the hash the first block chains from (a namespace root for a sequence's
  // first block), and the token ids of every stored block, in order.
  BlockHash parent_hash;
  std::vector<int32_t> token_ids;
};

struct KvEventBatch {
  uint64_t epoch = 0;
  uint64_t sequence = 0;  // 1 for the first batch of an epoch
  int64_t block_size = 0;
  // When the worker published it (its wall clock; 0: unknown): the router's event lag.
  int64_t published_unix_micros = 0;
  std::vector<KvEvent> events;
};

struct KvSnapshot {
  uint64_t epoch = 0;
  uint64_t sequence = 0;  // the last batch it includes; events after it follow
  int64_t block_size = 0;
  std::vector<BlockHash> block_hashes;  // every cached block, sorted
};

// Thread-safe. Publish is called by the engine thread; Subscribe, Unsubscribe and
// Snapshot from any thread. Subscribers run under the publisher's lock and must only
// hand the batch off (e.g. to a queue), never block or call back in.
class KvEventPublisher {
 public:
  using Subscriber = std::function<void(const KvEventBatch&)>;

  // epoch 0 picks a random one.
  explicit KvEventPublisher(int64_t block_size, uint64_t epoch = 0);

  uint64_t Subscribe(Subscriber subscriber);  // returns an id for Unsubscribe
  void Unsubscribe(uint64_t id);

  // Numbers the batch, applies it to the snapshot mirror and delivers it. Empty
  // batches are dropped.
  void Publish(std::vector<KvEvent> events);

  KvSnapshot Snapshot() const;
  uint64_t epoch() const { return epoch_; }
  uint64_t last_sequence() const;

 private:
  const int64_t block_size_;
  const uint64_t epoch_;
  mutable std::mutex mu_;
  uint64_t sequence_ = 0;
  uint64_t next_subscriber_ = 1;
  std::map<uint64_t, Subscriber> subscribers_;
  absl::flat_hash_set<BlockHash> cached_;  // what the published events add up to
};

}  // namespace baton::kvcache
