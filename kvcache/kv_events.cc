#include "kvcache/kv_events.h"

#include <algorithm>
#include <utility>

#include <chrono>
#include <random>

namespace baton::kvcache {
namespace {

uint64_t RandomEpoch() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

}  // namespace

KvEventPublisher::KvEventPublisher(int64_t block_size, uint64_t epoch)
    : block_size_(block_size), epoch_(epoch != 0 ? epoch : (RandomEpoch() | 1)) {}

uint64_t KvEventPublisher::Subscribe(Subscriber subscriber) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t id = next_subscriber_++;
  subscribers_.emplace(id, std::move(subscriber));
  return id;
}

void KvEventPublisher::Unsubscribe(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  subscribers_.erase(id);
}

void KvEventPublisher::Publish(std::vector<KvEvent> events) {
  if (events.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (const KvEvent& e : events) {
    switch (e.type) {
      case KvEvent::Type::kBlockStored:
        cached_.insert(e.block_hashes.begin(), e.block_hashes.end());
        break;
      case KvEvent::Type::kBlockRemoved:
        for (const BlockHash& h : e.block_hashes) cached_.erase(h);
        break;
      case KvEvent::Type::kAllCleared:
        cached_.clear();
        break;
    }
  }
  KvEventBatch batch;
  batch.epoch = epoch_;
  batch.sequence = ++sequence_;
  batch.block_size = block_size_;
  batch.published_unix_micros = std::chrono::duration_cast<std::chrono::microseconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count();
  batch.events = std::move(events);
  for (auto& [id, subscriber] : subscribers_) subscriber(batch);
}

KvSnapshot KvEventPublisher::Snapshot() const {
  KvSnapshot s;
  s.epoch = epoch_;
  s.block_size = block_size_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    s.sequence = sequence_;
    s.block_hashes.assign(cached_.begin(), cached_.end());
  }
  std::sort(s.block_hashes.begin(), s.block_hashes.end());
  return s;
}

uint64_t KvEventPublisher::last_sequence() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sequence_;
}

}  // namespace baton::kvcache
