#include "tests/chaos/link_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <deque>
#include <string>
#include <vector>

namespace baton::testing {
namespace {

// Bytes read but not yet written, per direction: past this the proxy stops reading, as a
// full TCP window would.
constexpr size_t kMaxQueued = 8 << 20;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

sockaddr_in Loopback(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

// Closes with an RST rather than a FIN: the peer sees "connection reset", as when a link's
// middlebox drops the connection.
void CloseHard(int fd) {
  linger l{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
  close(fd);
}

void Tune(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace

struct LinkProxy::Pipe {
  struct Chunk {
    int64_t ready_ns;
    std::string bytes;
    size_t sent = 0;
  };
  std::array<int, 2> fd = {-1, -1};           // 0: the caller's connection, 1: the worker's
  std::array<std::deque<Chunk>, 2> queue;     // queue[s]: read from fd[s], to write to fd[1 - s]
  std::array<size_t, 2> queued = {0, 0};      // bytes in queue[s]
  std::array<bool, 2> eof = {false, false};   // fd[s] has sent all it will
  std::array<bool, 2> shut = {false, false};  // and that was passed on (fd[1 - s] shut for writing)
  bool dead = false;
};

LinkProxy::LinkProxy(int target_port) : target_port_(target_port) {
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  sockaddr_in a = Loopback(0);
  socklen_t len = sizeof(a);
  if (listen_fd_ < 0 || bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      listen(listen_fd_, 128) != 0 ||
      getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    return;
  }
  port_ = ntohs(a.sin_port);
  thread_ = std::thread([this] { Run(); });
}

LinkProxy::~LinkProxy() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) close(listen_fd_);
}

void LinkProxy::Run() {
  std::vector<Pipe> pipes;
  std::vector<pollfd> fds;
  char buf[64 << 10];
  while (!stop_.load()) {
    if (reset_.exchange(false)) {
      for (Pipe& p : pipes) p.dead = true;
    }
    const bool hole = blackhole_.load();
    const int64_t now = NowNs();
    fds.assign(1, pollfd{listen_fd_, POLLIN, 0});
    for (Pipe& p : pipes) {
      for (int s = 0; s < 2; ++s) {
        short events = 0;
        if (!p.eof[s] && p.queued[s] < kMaxQueued) events |= POLLIN;
        const auto& out = p.queue[1 - s];
        if (!out.empty() && out.front().ready_ns <= now) events |= POLLOUT;
        // In a blackhole nothing moves and nothing is noticed (a negative fd is skipped).
        fds.push_back(pollfd{hole || p.dead ? -1 : p.fd[s], events, 0});
      }
    }
    // 5 ms: the granularity of a delay, and of noticing a setter.
    if (poll(fds.data(), fds.size(), 5) < 0 && errno != EINTR) break;

    for (size_t i = 0; i < pipes.size(); ++i) {
      Pipe& p = pipes[i];
      for (int s = 0; s < 2 && !p.dead; ++s) {
        const short got = fds[1 + 2 * i + s].revents;
        if (got == 0) continue;
        if ((got & (POLLIN | POLLHUP | POLLERR)) != 0 && !p.eof[s]) {
          const ssize_t n = recv(p.fd[s], buf, sizeof(buf), 0);
          if (n > 0) {
            p.queue[s].push_back({NowNs() + delay_ns_.load(), std::string(buf, n)});
            p.queued[s] += static_cast<size_t>(n);
          } else if (n == 0) {
            p.eof[s] = true;
          } else if (errno != EAGAIN && errno != EINTR) {
            p.dead = true;  // reset by its peer: reset the other side too
          }
        }
        auto& out = p.queue[1 - s];
        const int64_t ready = NowNs();
        while ((got & POLLOUT) != 0 && !p.dead && !out.empty() && out.front().ready_ns <= ready) {
          Pipe::Chunk& c = out.front();
          const ssize_t n =
              send(p.fd[s], c.bytes.data() + c.sent, c.bytes.size() - c.sent, MSG_NOSIGNAL);
          if (n < 0) {
            if (errno != EAGAIN && errno != EINTR) p.dead = true;
            break;
          }
          c.sent += static_cast<size_t>(n);
          p.queued[1 - s] -= static_cast<size_t>(n);
          if (c.sent < c.bytes.size()) break;
          out.pop_front();
        }
      }
      for (int s = 0; s < 2 && !p.dead; ++s) {
        if (p.eof[s] && p.queue[s].empty() && !p.shut[s]) {
          shutdown(p.fd[1 - s], SHUT_WR);
          p.shut[s] = true;
        }
      }
    }
    // Closed both ways, or reset: gone.
    for (auto it = pipes.begin(); it != pipes.end();) {
      if (it->dead) {
        CloseHard(it->fd[0]);
        CloseHard(it->fd[1]);
      } else if (it->shut[0] && it->shut[1]) {
        close(it->fd[0]);
        close(it->fd[1]);
      } else {
        ++it;
        continue;
      }
      it = pipes.erase(it);
    }

    if ((fds[0].revents & POLLIN) != 0) {
      for (int caller;
           (caller = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0;) {
        // A blocking connect: on loopback it is answered at once, refused when the worker
        // is down (the caller then sees a reset, as from the worker itself).
        const int worker = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a = Loopback(target_port_);
        if (worker < 0 || connect(worker, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
          if (worker >= 0) close(worker);
          CloseHard(caller);
          continue;
        }
        const int flags = fcntl(worker, F_GETFL);
        fcntl(worker, F_SETFL, flags | O_NONBLOCK);
        Tune(caller);
        Tune(worker);
        Pipe p;
        p.fd[0] = caller;
        p.fd[1] = worker;
        pipes.push_back(std::move(p));
      }
    }
  }
  for (Pipe& p : pipes) {
    CloseHard(p.fd[0]);
    CloseHard(p.fd[1]);
  }
}

}  // namespace baton::testing
