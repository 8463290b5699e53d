#include "service/cancel_watcher.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <utility>
#include <vector>

#include "common/check.h"

namespace baton::service {

CancelWatcher::CancelWatcher(absl::Duration poll_interval)
    : poll_interval_(poll_interval),
      epoll_(epoll_create1(EPOLL_CLOEXEC)),
      wake_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  BATON_CHECK(epoll_ >= 0 && wake_ >= 0);  // only fails when out of descriptors or memory
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 0;  // ids start at 1
  BATON_CHECK(epoll_ctl(epoll_, EPOLL_CTL_ADD, wake_, &ev) == 0);
  thread_ = std::thread([this] { Run(); });
}

CancelWatcher::~CancelWatcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  Wake();
  changed_.notify_all();
  thread_.join();
  close(wake_);
  close(epoll_);
}

void CancelWatcher::Wake() {
  const uint64_t one = 1;
  (void)!write(wake_, &one, sizeof one);  // a full counter already wakes the thread
}

uint64_t CancelWatcher::Watch(std::function<bool()> gone, std::function<void()> on_gone, int fd) {
  auto entry = std::make_shared<Entry>(Entry{std::move(gone), std::move(on_gone), -1});
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t id = next_id_++;
  if (fd >= 0) {
    // Level-triggered: a hang-up that comes before epoll_wait is still reported.
    epoll_event ev{};
    ev.events = EPOLLRDHUP | EPOLLHUP | EPOLLERR;
    ev.data.u64 = id;
    if (epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev) == 0) entry->fd = fd;
  }
  if (entry->fd < 0) {
    // Not a socket epoll takes (or none given): polled instead.
    if (polled_++ == 0) Wake();
  }
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
    if (doomed->fd >= 0) {
      (void)epoll_ctl(epoll_, EPOLL_CTL_DEL, doomed->fd, nullptr);
    } else {
      --polled_;
    }
  }
  if (std::this_thread::get_id() == thread_.get_id()) return;  // would wait for itself
  changed_.wait(lock, [&] { return running_ != id; });
}

void CancelWatcher::CheckAll() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    check_all_ = true;
  }
  Wake();
}

size_t CancelWatcher::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

void CancelWatcher::Check(uint64_t id, std::unique_lock<std::mutex>& lock) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;  // unwatched meanwhile
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
  bool fire = false;
  it = entries_.find(id);
  if (it != entries_.end()) {
    if (gone) {
      fire = true;
      if (entry->fd >= 0) {
        (void)epoll_ctl(epoll_, EPOLL_CTL_DEL, entry->fd, nullptr);
      } else {
        --polled_;
      }
      entries_.erase(it);
    } else if (entry->fd >= 0) {
      // The socket reported, yet the client is there (a level that does not clear):
      // poll this entry from now on rather than wake for it again and again.
      (void)epoll_ctl(epoll_, EPOLL_CTL_DEL, entry->fd, nullptr);
      entry->fd = -1;
      ++polled_;
    }
  }
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

void CancelWatcher::Run() {
  const int interval_ms =
      std::max<int>(1, static_cast<int>(absl::ToInt64Milliseconds(poll_interval_)));
  std::vector<uint64_t> ids;
  std::vector<epoll_event> events(64);
  std::unique_lock<std::mutex> lock(mu_);
  auto next_poll = std::chrono::steady_clock::now();
  while (!stop_) {
    int timeout = -1;
    if (polled_ > 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          next_poll - std::chrono::steady_clock::now());
      timeout = static_cast<int>(std::max<int64_t>(0, left.count()));
    }
    lock.unlock();
    const int n = epoll_wait(epoll_, events.data(), static_cast<int>(events.size()), timeout);
    lock.lock();
    ids.clear();
    for (int i = 0; i < n; ++i) {
      // A copy: epoll_event is packed on x86-64, so its u64 may sit misaligned and must
      // not be bound to a reference (push_back's).
      const uint64_t id = events[i].data.u64;
      if (id == 0) {
        uint64_t count = 0;
        (void)!read(wake_, &count, sizeof count);
      } else {
        ids.push_back(id);
      }
    }
    if (check_all_) {
      check_all_ = false;
      for (const auto& [id, entry] : entries_) ids.push_back(id);
    }
    if (polled_ > 0 && std::chrono::steady_clock::now() >= next_poll) {
      next_poll = std::chrono::steady_clock::now() + std::chrono::milliseconds(interval_ms);
      for (const auto& [id, entry] : entries_) {
        if (entry->fd < 0) ids.push_back(id);
      }
    }
    for (uint64_t id : ids) {
      if (stop_) break;
      Check(id, lock);
    }
  }
}

}  // namespace baton::service
