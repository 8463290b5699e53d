#include "service/cancel_watcher.h"

#include <chrono>
#include <utility>
#include <vector>

namespace baton::service {

CancelWatcher::CancelWatcher(absl::Duration poll_interval)
    : poll_interval_(poll_interval), thread_([this] { Run(); }) {}

CancelWatcher::~CancelWatcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

uint64_t CancelWatcher::Watch(std::function<bool()> gone, std::function<void()> on_gone) {
  auto entry = std::make_shared<Entry>(Entry{std::move(gone), std::move(on_gone)});
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t id = next_id_++;
  entries_.emplace(id, std::move(entry));
  return id;
}

void CancelWatcher::Unwatch(uint64_t id) {
  std::shared_ptr<Entry> doomed;  // destroyed after the lock: its captures may call us
  std::unique_lock<std::mutex> lock(mu_);
  auto it = entries_.find(id);
  if (it != entries_.end()) {
    doomed = std::move(it->second);
    entries_.erase(it);
  }
  if (std::this_thread::get_id() == thread_.get_id()) return;  // would wait for itself
  changed_.wait(lock, [&] { return running_ != id; });
}

size_t CancelWatcher::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

void CancelWatcher::Run() {
  const auto interval = absl::ToChronoNanoseconds(poll_interval_);
  std::vector<uint64_t> ids;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    ids.clear();
    for (const auto& [id, entry] : entries_) ids.push_back(id);
    for (uint64_t id : ids) {
      if (stop_) break;
      auto it = entries_.find(id);
      if (it == entries_.end()) continue;  // unwatched during this pass
      std::shared_ptr<Entry> entry = it->second;
      running_ = id;
      lock.unlock();
      bool gone = false;
      try {
        gone = entry->gone();
      } catch (...) {
        // A predicate that throws cannot tell; treat the client as still there.
      }
      lock.lock();
      // Unwatch may have removed the entry while `gone` ran; then on_gone must not run.
      const bool fire = gone && entries_.erase(id) > 0;
      lock.unlock();
      if (fire) {
        try {
          entry->on_gone();
        } catch (...) {
        }
      }
      entry.reset();  // the caller's captures die before Unwatch returns
      lock.lock();
      running_ = 0;
      changed_.notify_all();
    }
    changed_.wait_for(lock, interval, [this] { return stop_; });
  }
}

}  // namespace baton::service
