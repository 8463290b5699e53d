// Turns "is the client still there?" into a one-shot callback, for work that cannot block
// on the client itself: an HTTP handler waiting for tokens (HttpResponder::PeerClosed)
// that must cancel its generation. Given the client's socket, the watcher's thread sleeps
// in epoll until the socket reports a hang-up, so a disconnect is seen when it happens and
// an idle watcher costs nothing; entries without a socket are polled.
//
//   CancelWatcher watcher;  // one per server
//   uint64_t id = watcher.Watch([&out] { return out.PeerClosed(); },
//                               [&engine, rid] { engine.Cancel(rid); }, out.PeerFd());
//   ... stream tokens ...
//   watcher.Unwatch(id);  // before `out` and `engine` go away
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"

namespace baton::service {

class CancelWatcher {
 public:
  explicit CancelWatcher(absl::Duration poll_interval = absl::Milliseconds(10));
  ~CancelWatcher();  // stops the thread; callbacks still registered are never called
  CancelWatcher(const CancelWatcher&) = delete;
  CancelWatcher& operator=(const CancelWatcher&) = delete;

  // The watcher's thread calls `gone`: when `fd` (>= 0, a socket that stays open until
  // Unwatch) reports a hang-up or an error, or, without fd, every poll_interval. The first
  // time it returns true it calls `on_gone` once and forgets the entry. Both run on the
  // watcher's thread, so they should be quick; they may call Watch and Unwatch.
  uint64_t Watch(std::function<bool()> gone, std::function<void()> on_gone, int fd = -1);

  // Forgets `id`. When it returns, neither function of the entry is running or will run
  // (except when called from one of them, on the watcher's thread). Unknown ids are ignored.
  void Unwatch(uint64_t id);

  // Asks every entry's `gone` once, soon, on the watcher's thread, whether or not its
  // socket reported anything: for a reason to give up that is not the client's (a
  // server whose drain ran out of time).
  void CheckAll();

  size_t size() const;  // entries being watched

 private:
  struct Entry {
    std::function<bool()> gone;
    std::function<void()> on_gone;
    int fd = -1;  // registered with epoll_; -1: polled
  };

  void Run();
  // Calls entry `id`'s gone() and, when true, its on_gone(): on the thread, lock held.
  void Check(uint64_t id, std::unique_lock<std::mutex>& lock);
  void Wake();  // makes epoll_wait return, to see a change

  const absl::Duration poll_interval_;
  // std::mutex rather than absl::Mutex: Debian's Abseil is not built for TSan, which would
  // then not see the locking.
  mutable std::mutex mu_;
  std::condition_variable changed_;  // running_ or stop_ changed
  // All guarded by mu_.
  absl::flat_hash_map<uint64_t, std::shared_ptr<Entry>> entries_;
  uint64_t next_id_ = 1;
  uint64_t running_ = 0;  // id whose functions are executing, 0: none
  int polled_ = 0;        // entries without a descriptor
  bool stop_ = false;
  bool check_all_ = false;  // CheckAll was called
  int epoll_ = -1;
  int wake_ = -1;  // an eventfd in epoll_
  std::thread thread_;
};

}  // namespace baton::service
