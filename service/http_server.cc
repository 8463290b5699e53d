#include "service/http_server.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "common/status.h"
#include "common/strings.h"
#include "service/http_connection.h"
#include "service/request_waiter.h"

namespace baton::service {

namespace net = boost::asio;
using http_internal::Connection;
using http_internal::RequestWaiter;

namespace {

// Connections over max_connections each get a thread for their 503; past this many at once
// they are closed without an answer, so a flood cannot grow threads without bound.
constexpr int kMaxRejecting = 64;

absl::Status ValidateOptions(const HttpServerOptions& o) {
  if (o.port < 0 || o.port > 65535) {
    return absl::InvalidArgumentError(StrCat("HTTP port ", o.port, " is not in [0, 65535]"));
  }
  if (o.max_connections < 1) {
    return absl::InvalidArgumentError(
        StrCat("max_connections is ", o.max_connections, "; it must be at least 1"));
  }
  if (o.max_header_bytes < 64) {
    return absl::InvalidArgumentError(
        StrCat("max_header_bytes is ", o.max_header_bytes, "; it must be at least 64"));
  }
  if (o.idle_timeout_ms < 1 || o.read_timeout_ms < 1 || o.write_timeout_ms < 1) {
    return absl::InvalidArgumentError(StrCat("HTTP timeouts must be at least 1 ms (idle ",
                                             o.idle_timeout_ms, ", read ", o.read_timeout_ms,
                                             ", write ", o.write_timeout_ms, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

struct HttpServer::Impl {
  // A connection being answered on a thread of its own.
  struct Entry {
    std::shared_ptr<Connection> conn;
    std::thread thread;
    bool rejecting = false;
  };

  Impl(HttpServerOptions o, HttpHandler h)
      : options(std::move(o)),
        handler(std::move(h)),
        bodies(options.bodies != nullptr
                   ? options.bodies
                   : std::make_shared<service::ByteBudget>(options.max_inflight_body_bytes)),
        waiter(options, [this](std::shared_ptr<Connection> c) { Dispatch(std::move(c), false); }),
        acceptor(io) {}
  ~Impl() {
    // Only reached without a Shutdown when Start fails half-way.
    Shutdown(absl::ZeroDuration());
    if (wake_fd >= 0) ::close(wake_fd);
  }

  absl::Status Listen();
  void AcceptLoop();
  // A new connection, counted against max_connections until it closes.
  std::shared_ptr<Connection> Adopt(net::ip::tcp::socket socket);
  // Serves `conn` on a new thread (answers 503 with `reject`).
  void Dispatch(std::shared_ptr<Connection> conn, bool reject);
  void RunConnection(uint64_t id, std::shared_ptr<Connection> conn, bool reject);
  void JoinFinished();
  // At max_connections with no connection waiting between requests: ends the read of the
  // request body that began the earliest (its thread answers 503). False when none is
  // being read.
  bool EvictSlowestBody();
  void Shutdown(absl::Duration grace);

  const HttpServerOptions options;
  const HttpHandler handler;
  // Request bodies held by all connections at once.
  const std::shared_ptr<service::ByteBudget> bodies;
  // Holds connections between requests. Declared before what its thread calls into.
  RequestWaiter waiter;
  net::io_context io;  // owns the sockets' services; never run: all I/O is synchronous
  net::ip::tcp::acceptor acceptor;
  int wake_fd = -1;  // eventfd that stops the accept loop
  int port = 0;
  std::thread accept_thread;
  std::atomic<bool> stopping{false};
  // Set by BeginDrain and Shutdown: every response says Connection: close and its
  // connection closes after it, so that clients reconnect (to another replica).
  std::atomic<bool> closing{false};
  // Open connections counted against max_connections: waiting in `waiter` or being served.
  std::atomic<int> open{0};

  // std::mutex rather than absl::Mutex: Debian's Abseil is not built for TSan, which would
  // then not see the locking.
  mutable std::mutex mu;
  std::condition_variable connection_ended;
  // All guarded by mu. A connection leaves `entries` before its thread lets go of it, so
  // that Shutdown can ::shutdown() every fd it finds here without hitting a reused
  // descriptor.
  absl::flat_hash_map<uint64_t, Entry> entries;
  std::vector<std::thread> finished;  // exited, to be joined
  uint64_t next_id = 0;
  int rejecting = 0;

  std::mutex shutdown_mu;  // serializes Shutdown calls
  bool shut_down = false;  // guarded by shutdown_mu
};

absl::Status HttpServer::Impl::Listen() {
  boost::system::error_code ec;
  net::ip::tcp::resolver resolver(io);
  auto results = resolver.resolve(options.host, std::to_string(options.port),
                                  net::ip::resolver_base::passive, ec);
  if (ec || results.empty()) {
    return absl::InvalidArgumentError(
        StrCat("cannot resolve HTTP host '", options.host, "': ", ec.message()));
  }
  std::string last_error;
  for (const auto& result : results) {
    const net::ip::tcp::endpoint endpoint = result.endpoint();
    acceptor.close(ec);
    acceptor.open(endpoint.protocol(), ec);
    if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor.bind(endpoint, ec);
    if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
    if (!ec) acceptor.non_blocking(true, ec);
    if (!ec) {
      port = acceptor.local_endpoint(ec).port();
      if (!ec) break;
    }
    last_error = ec.message();
  }
  if (ec) {
    acceptor.close(ec);
    return absl::UnavailableError(
        StrCat("cannot listen on ", options.host, ":", options.port, ": ", last_error));
  }
  wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd < 0) {
    return absl::InternalError(StrCat("eventfd: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

void HttpServer::Impl::AcceptLoop() {
  for (;;) {
    pollfd fds[2] = {{acceptor.native_handle(), POLLIN, 0}, {wake_fd, POLLIN, 0}};
    int r = ::poll(fds, 2, -1);
    if (stopping.load() || (r > 0 && fds[1].revents != 0)) return;
    if (r <= 0) continue;  // EINTR
    net::ip::tcp::socket socket(io);
    boost::system::error_code ec;
    acceptor.accept(socket, ec);
    if (ec == net::error::no_descriptors || ec == net::error::no_buffer_space ||
        ec == net::error::no_memory) {
      // Out of descriptors or memory: back off instead of spinning on the pending connection.
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    if (ec) continue;
    // Each SSE event is one small write; without this, Nagle holds it until the client's
    // delayed ACK (up to ~40 ms): docs/perf/frontdoor.md measured 1-stream p99 24 ms -> 1.6 ms.
    socket.set_option(net::ip::tcp::no_delay(true), ec);
    JoinFinished();
    // At the limit, a connection that is only waiting makes room; with none, the new one
    // is turned away.
    if (open.load() >= options.max_connections && !waiter.EvictOne() && !EvictSlowestBody()) {
      Dispatch(std::make_shared<Connection>(std::move(socket), options), /*reject=*/true);
    } else {
      waiter.Park(Adopt(std::move(socket)));
    }
  }
}

std::shared_ptr<Connection> HttpServer::Impl::Adopt(net::ip::tcp::socket socket) {
  ++open;
  std::shared_ptr<Connection> conn(new Connection(std::move(socket), options),
                                   [this](Connection* c) {
                                     delete c;
                                     --open;
                                   });
  conn->remote = http_internal::RemoteAddress(conn->socket);
  return conn;
}

void HttpServer::Impl::Dispatch(std::shared_ptr<Connection> conn, bool reject) {
  JoinFinished();
  std::lock_guard<std::mutex> lock(mu);
  if (stopping.load()) return;
  if (reject && rejecting >= kMaxRejecting) return;  // closed unanswered
  const uint64_t id = next_id++;
  Entry& entry = entries[id];
  entry.conn = conn;
  entry.rejecting = reject;
  try {
    // The thread cannot finish before `entry.thread` is set: it needs `mu` to deregister.
    entry.thread = std::thread(&Impl::RunConnection, this, id, std::move(conn), reject);
  } catch (const std::system_error&) {
    entries.erase(id);
    return;
  }
  if (reject) ++rejecting;
}

void HttpServer::Impl::RunConnection(uint64_t id, std::shared_ptr<Connection> conn, bool reject) {
  auto after = http_internal::AfterServe::kClose;
  if (reject) {
    http_internal::RejectConnection(*conn, options);
  } else {
    after = http_internal::ServeConnection(*conn, options, handler, closing, *bodies);
  }
  // Before this thread deregisters: Park may hand the connection straight to a new thread,
  // and Dispatch joins the finished ones, which must not include this one yet. After
  // Shutdown has stopped the waiter, Park drops (closes) the connection.
  if (after == http_internal::AfterServe::kPark) waiter.Park(std::move(conn));
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = entries.find(id);
    finished.push_back(std::move(it->second.thread));
    if (reject) --rejecting;
    entries.erase(it);
  }
  connection_ended.notify_all();
}

bool HttpServer::Impl::EvictSlowestBody() {
  std::lock_guard<std::mutex> lock(mu);
  Connection* chosen = nullptr;
  int64_t earliest = 0;
  for (auto& [id, entry] : entries) {
    const int64_t since = entry.conn->body_since_ns.load();
    if (since == 0 || entry.conn->evicted.load()) continue;
    if (chosen == nullptr || since < earliest) {
      chosen = entry.conn.get();
      earliest = since;
    }
  }
  if (chosen == nullptr) return false;
  chosen->evicted.store(true);
  // Its thread's read ends; the write side stays open for the 503. The fd is valid: the
  // entry is still here, under mu.
  ::shutdown(chosen->fd, SHUT_RD);
  return true;
}

void HttpServer::Impl::JoinFinished() {
  std::vector<std::thread> done;
  {
    std::lock_guard<std::mutex> lock(mu);
    done.swap(finished);
  }
  for (std::thread& t : done) t.join();
}

void HttpServer::Impl::Shutdown(absl::Duration grace) {
  std::lock_guard<std::mutex> guard(shutdown_mu);
  if (shut_down) return;
  shut_down = true;
  closing.store(true);
  stopping.store(true);
  if (wake_fd >= 0) {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd, &one, sizeof(one));
  }
  if (accept_thread.joinable()) accept_thread.join();
  boost::system::error_code ec;
  acceptor.close(ec);

  // Connections between requests close now; those being answered see `stopping` after
  // their response (which says Connection: close) and close then.
  waiter.Stop();
  {
    std::unique_lock<std::mutex> lock(mu);
    for (auto& [id, entry] : entries) {
      if (entry.rejecting) ::shutdown(entry.conn->fd, SHUT_RDWR);
    }
    auto none_left = [this] { return entries.empty(); };
    const auto deadline =
        std::chrono::steady_clock::now() +
        absl::ToChronoMilliseconds(std::clamp(grace, absl::ZeroDuration(), absl::Hours(24 * 365)));
    if (!connection_ended.wait_until(lock, deadline, none_left)) {
      // Wakes handlers blocked writing to slow clients; the others see PeerClosed().
      for (auto& [id, entry] : entries) ::shutdown(entry.conn->fd, SHUT_RDWR);
      connection_ended.wait(lock, none_left);
    }
  }
  JoinFinished();
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(HttpServerOptions options,
                                                              HttpHandler handler) {
  BATON_RETURN_IF_ERROR(ValidateOptions(options));
  if (!handler) return absl::InvalidArgumentError("HTTP server needs a handler");
  try {
    auto impl = std::make_unique<Impl>(std::move(options), std::move(handler));
    BATON_RETURN_IF_ERROR(impl->Listen());
    BATON_RETURN_IF_ERROR(impl->waiter.Start());
    impl->accept_thread = std::thread(&Impl::AcceptLoop, impl.get());
    return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
  } catch (const std::exception& e) {
    return absl::InternalError(StrCat("starting HTTP server: ", e.what()));
  }
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { Shutdown(); }

int HttpServer::port() const { return impl_->port; }

int HttpServer::open_connections() const { return impl_->open.load(); }

void HttpServer::BeginDrain() { impl_->closing.store(true); }

void HttpServer::Shutdown(absl::Duration grace) { impl_->Shutdown(grace); }

}  // namespace baton::service
