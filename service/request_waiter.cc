#include "service/request_waiter.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>
#include <vector>

#include "common/strings.h"

namespace baton::service::http_internal {
namespace {

using Clock = Connection::Clock;
using std::chrono::milliseconds;

// How often overdue connections are looked for: timeouts are kept to within this.
constexpr int kTickMs = 50;

uint32_t EventsFor(bool write) {
  // Level-triggered: only this thread reads a held connection, and it reads until the socket
  // has nothing more or the head is whole.
  return write ? EPOLLOUT : (EPOLLIN | EPOLLRDHUP);
}

}  // namespace

RequestWaiter::RequestWaiter(const HttpServerOptions& options, Ready ready)
    : options_(options), ready_(std::move(ready)) {}

RequestWaiter::~RequestWaiter() {
  Stop();
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

absl::Status RequestWaiter::Start() {
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_fd_ < 0 || wake_fd_ < 0) {
    return absl::InternalError(StrCat("epoll/eventfd: ", std::strerror(errno)));
  }
  epoll_event wake{};
  wake.events = EPOLLIN;
  wake.data.fd = wake_fd_;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &wake) != 0) {
    return absl::InternalError(StrCat("epoll_ctl: ", std::strerror(errno)));
  }
  thread_ = std::thread(&RequestWaiter::Loop, this);
  return absl::OkStatus();
}

RequestWaiter::Step RequestWaiter::Advance(Connection& conn) const {
  if (!conn.handshaken) {
    if (conn.request_started == Clock::time_point::max()) conn.request_started = Clock::now();
    switch (conn.stream.HandshakeNoWait()) {
      case SocketStream::NoWait::kDone:
        conn.handshaken = true;
        if (conn.pending.empty()) conn.request_started = Clock::time_point::max();
        break;
      case SocketStream::NoWait::kWantRead:
        return Step::kWantRead;
      case SocketStream::NoWait::kWantWrite:
        return Step::kWantWrite;
      case SocketStream::NoWait::kFailed:
        return Step::kDrop;
    }
  }
  // One byte past the limit is enough for the server to answer 431.
  const size_t limit = options_.max_header_bytes + 1;
  const auto read = conn.stream.ReadNoWait(&conn.pending, limit);
  if (!conn.pending.empty() && conn.request_started == Clock::time_point::max()) {
    conn.request_started = Clock::now();
  }
  if (HasRequestHead(conn.pending) || conn.pending.size() >= limit) return Step::kReady;
  // A client that closes or fails before its head is whole has nothing to be answered.
  if (read != SocketStream::NoWait::kWantRead) return Step::kDrop;
  return Step::kWantRead;
}

Clock::time_point RequestWaiter::DeadlineOf(const Held& held) const {
  const Connection& conn = *held.conn;
  if (conn.handshaken && conn.pending.empty()) {
    return held.idle_since + milliseconds(options_.idle_timeout_ms);
  }
  return conn.request_started + milliseconds(options_.read_timeout_ms);
}

void RequestWaiter::Park(std::shared_ptr<Connection> conn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
  }
  // The caller still owns `conn` alone: what has already arrived (or what TLS decrypted
  // beyond the last request) is taken here, since epoll would not report it again.
  const Step step = Advance(*conn);
  if (step == Step::kDrop) return;
  if (step == Step::kReady) {
    ready_(std::move(conn));
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (stopped_) return;
  const int fd = conn->fd;
  epoll_event event{};
  event.events = EventsFor(step == Step::kWantWrite);
  event.data.fd = fd;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event) != 0) return;  // dropped
  Held& held = held_[fd];
  held = Held{};
  held.conn = std::move(conn);
  held.idle_since = Clock::now();
  held.waiting_for = step;
  Describe(*held.conn, &held);
}

void RequestWaiter::Describe(const Connection& conn, Held* held) {
  held->idle = conn.handshaken && conn.pending.empty();
  held->waiting_since = held->idle ? held->idle_since : conn.request_started;
}

void RequestWaiter::Settle(int fd, Step step) {
  std::shared_ptr<Connection> ready;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = held_.find(fd);
    if (it == held_.end()) return;
    it->second.advancing = false;
    if (step == Step::kReady || step == Step::kDrop) {
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
      if (step == Step::kReady) ready = std::move(it->second.conn);
      held_.erase(it);  // a dropped connection closes with its last reference
    } else {
      Describe(*it->second.conn, &it->second);
      if (step != it->second.waiting_for) {
        epoll_event event{};
        event.events = EventsFor(step == Step::kWantWrite);
        event.data.fd = fd;
        ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &event);
        it->second.waiting_for = step;
      }
    }
  }
  if (ready) ready_(std::move(ready));
}

void RequestWaiter::ExpireOverdue() {
  std::vector<std::shared_ptr<Connection>> overdue;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = Clock::now();
    for (auto it = held_.begin(); it != held_.end();) {
      if (DeadlineOf(it->second) > now) {
        ++it;
        continue;
      }
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->first, nullptr);
      overdue.push_back(std::move(it->second.conn));
      held_.erase(it++);
    }
  }
  for (const auto& conn : overdue) {
    // A head begun but not finished is told why; an idle connection or an unfinished TLS
    // handshake has no one to tell.
    if (conn->handshaken && !conn->pending.empty()) {
      SendErrorNoWait(*conn, 408, ReadTimeoutMessage(options_));
    }
  }
}

bool RequestWaiter::EvictOne() {
  std::shared_ptr<Connection> evicted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto chosen = held_.end();
    // Idle ones first (RFC 9112 §9.8 lets a server close an idle connection at any time),
    // then the slowest head: either way the one that has waited the longest.
    auto rank = [](const Held& h) { return std::make_pair(h.idle ? 0 : 1, h.waiting_since); };
    for (auto it = held_.begin(); it != held_.end(); ++it) {
      if (it->second.advancing) continue;
      if (chosen == held_.end() || rank(it->second) < rank(chosen->second)) chosen = it;
    }
    if (chosen == held_.end()) return false;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, chosen->first, nullptr);
    evicted = std::move(chosen->second.conn);
    held_.erase(chosen);
  }
  // No other thread has it now: out of held_, and not being advanced.
  if (evicted->handshaken && !evicted->pending.empty()) {
    SendErrorNoWait(*evicted, 503,
                    StrCat("the server is at its limit of ", options_.max_connections,
                           " open connections and closed this one, the slowest to send its "
                           "request; retry later"));
  }
  return true;
}

void RequestWaiter::Loop() {
  epoll_event events[64];
  auto next_sweep = Clock::now();
  for (;;) {
    const int n = ::epoll_wait(epoll_fd_, events, 64, kTickMs);
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == wake_fd_) {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopped_) return;
        continue;
      }
      std::shared_ptr<Connection> conn;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = held_.find(fd);
        if (it != held_.end()) {
          conn = it->second.conn;
          it->second.advancing = true;  // until Settle
        }
      }
      // Only this thread advances a held connection; Park's caller let go of it.
      if (conn) Settle(fd, Advance(*conn));
    }
    if (Clock::now() >= next_sweep) {
      ExpireOverdue();
      next_sweep = Clock::now() + milliseconds(kTickMs);
    }
  }
}

void RequestWaiter::Stop() {
  absl::flat_hash_map<int, Held> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    stopped_ = true;
    dropped.swap(held_);
  }
  if (wake_fd_ >= 0) {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof(one));
  }
  if (thread_.joinable()) thread_.join();
  // `dropped` closes every connection it held as it goes.
}

int RequestWaiter::held() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(held_.size());
}

}  // namespace baton::service::http_internal
