// One accepted HTTP/1.1 connection, served on a thread of its own while a request is in
// progress (the RequestWaiter holds it between requests): keep-alive, pipelining,
// Expect: 100-continue, chunked bodies, and the errors the server answers without calling
// the handler (400, 408, 413, 429, 431, 503). Internal to HttpServer.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "boost/asio/ip/tcp.hpp"
#include "service/byte_budget.h"
#include "service/http_options.h"
#include "service/http_responder.h"
#include "service/socket_stream.h"

namespace baton::service::http_internal {

// Owned by whoever serves it now: the RequestWaiter while it waits for a request head, a
// thread of the server while it answers. The socket closes when the last owner lets go.
struct Connection {
  using Clock = SocketStream::Clock;

  Connection(boost::asio::ip::tcp::socket s, const HttpServerOptions& options)
      : socket(std::move(s)),
        fd(socket.native_handle()),
        stream(socket, std::chrono::milliseconds(options.write_timeout_ms), options.tls.get()) {}

  boost::asio::ip::tcp::socket socket;
  // Valid until `socket` is closed; other threads may only ::shutdown() it, to wake the
  // thread serving it.
  const int fd;
  SocketStream stream;
  bool handshaken = false;  // TLS handshake done (always true in effect for plaintext)
  // Bytes received but not yet parsed: the start of the next request.
  std::string pending;
  // When the first byte of the request in `pending` arrived; its read timeout counts from
  // here. Clock::time_point::max() while `pending` is empty.
  Clock::time_point request_started = Clock::time_point::max();
  std::string remote;  // "ip:port" of the client, or "" if unknown
  // While the serving thread reads a request body: when it began (steady-clock ns), else 0.
  // The accept thread reads it to pick a connection to evict at max_connections, and sets
  // `evicted` before it shuts the socket's read side to end that read.
  std::atomic<int64_t> body_since_ns{0};
  std::atomic<bool> evicted{false};
};

// Whether `bytes` hold a whole request head (up to its blank line).
bool HasRequestHead(std::string_view bytes);

// Serves the requests whose heads `conn.pending` holds, as long as more whole ones arrive
// with them (pipelining). Returns kPark when the connection should wait, without a
// thread, for its next request head; kClose when it is done (the peer closed, a timeout, an
// error, or a draining server). Never throws. `bodies` bounds the request bodies that all
// connections hold at once.
enum class AfterServe { kPark, kClose };
AfterServe ServeConnection(Connection& conn, const HttpServerOptions& options,
                           const HttpHandler& handler, const std::atomic<bool>& stopping,
                           ByteBudget& bodies);

// An error the server answers itself, sent without waiting (a client too slow to send its
// request head may not be reading either), then the connection's end.
void SendErrorNoWait(Connection& conn, int status, std::string_view message);
// The 408 for a request head that did not arrive within the read timeout.
std::string ReadTimeoutMessage(const HttpServerOptions& options);

// "ip:port" of the socket's peer (IPv4-mapped addresses as IPv4), or "" if unknown.
std::string RemoteAddress(const boost::asio::ip::tcp::socket& socket);

// Answers 503 on a connection over max_connections. Never throws.
void RejectConnection(Connection& conn, const HttpServerOptions& options);

}  // namespace baton::service::http_internal
