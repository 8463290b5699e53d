// Holds HTTP connections while they wait for a request, without a thread each: one epoll
// thread finishes their TLS handshakes and reads what arrives until a whole request head is
// there, then hands the connection to the server, which serves it on a thread. So an idle
// keep-alive client, or a slow one sending its head a byte at a time, costs a descriptor
// and its buffered bytes, never a thread that another client could have had. Internal to
// HttpServer.
//
//   RequestWaiter waiter(options, [&](std::shared_ptr<Connection> c) { Serve(c); });
//   BATON_RETURN_IF_ERROR(waiter.Start());
//   waiter.Park(std::move(conn));  // after accept, and after each response
//   ...
//   waiter.Stop();                 // closes every connection it holds
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "service/http_connection.h"
#include "service/http_options.h"

namespace baton::service::http_internal {

class RequestWaiter {
 public:
  // Called with a connection whose `pending` holds a whole request head (or more bytes than
  // a head may have, for the server to refuse), on the waiter's thread or on Park's caller.
  using Ready = std::function<void(std::shared_ptr<Connection>)>;

  RequestWaiter(const HttpServerOptions& options, Ready ready);
  ~RequestWaiter();  // Stop()
  RequestWaiter(const RequestWaiter&) = delete;
  RequestWaiter& operator=(const RequestWaiter&) = delete;

  absl::Status Start();

  // Takes `conn` until its next request head is whole, then passes it to `ready`. A
  // connection that closes, fails, or times out first is dropped: a head begun but not
  // finished within the read timeout gets a 408; an idle one is closed after the idle
  // timeout, a TLS handshake after the read timeout. After Stop(), drops `conn` at once.
  void Park(std::shared_ptr<Connection> conn);

  // Makes room for a new connection when the server is at max_connections: closes the
  // connection idle the longest, or, with none idle, the one whose head began the earliest
  // (with a 408). False when it holds none.
  bool EvictOne();

  // Drops every connection held, and any parked later; joins the thread. Idempotent.
  void Stop();

  // Connections held now.
  int held() const;

 private:
  enum class Step { kReady, kWantRead, kWantWrite, kDrop };
  struct Held {
    std::shared_ptr<Connection> conn;
    Connection::Clock::time_point idle_since;  // when it was parked
    Step waiting_for;
    // For EvictOne, which runs on the accept thread and so may not read `conn`: whether
    // it waits for a request (no byte of one yet), and since when it has waited.
    bool idle = false;
    Connection::Clock::time_point waiting_since;
    // The waiter's thread is reading it: EvictOne leaves it alone.
    bool advancing = false;
  };

  // Moves `conn` as far as it goes without waiting: the handshake, then reading.
  Step Advance(Connection& conn) const;
  Connection::Clock::time_point DeadlineOf(const Held& held) const;
  void Loop();
  // On the waiter's thread: acts on what Advance said about a held connection.
  void Settle(int fd, Step step);
  // What EvictOne may know of a connection, taken by the thread that owns it now.
  static void Describe(const Connection& conn, Held* held);
  void ExpireOverdue();

  const HttpServerOptions& options_;
  const Ready ready_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::thread thread_;

  // std::mutex rather than absl::Mutex, as in HttpServer: TSan sees it.
  mutable std::mutex mu_;
  bool stopped_ = false;                 // guarded by mu_
  absl::flat_hash_map<int, Held> held_;  // by descriptor; guarded by mu_
};

}  // namespace baton::service::http_internal
