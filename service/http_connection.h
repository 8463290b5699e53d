// One accepted HTTP/1.1 connection, served on its own thread: keep-alive, pipelining,
// Expect: 100-continue, chunked bodies, and the errors the server answers without calling
// the handler (400, 408, 413, 429, 431, 503). Internal to HttpServer.
#pragma once

#include <atomic>

#include "boost/asio/ip/tcp.hpp"
#include "service/byte_budget.h"
#include "service/http_options.h"
#include "service/http_responder.h"

namespace baton::service::http_internal {

struct Connection {
  // Idle: waiting for the first byte of the next request, so a draining server may close it.
  enum class Phase { kIdle, kBusy };

  explicit Connection(boost::asio::ip::tcp::socket s)
      : socket(std::move(s)), fd(socket.native_handle()) {}

  boost::asio::ip::tcp::socket socket;
  // Valid until `socket` is closed; other threads may only ::shutdown() it, to wake the
  // connection's thread.
  const int fd;
  std::atomic<Phase> phase{Phase::kBusy};
};

// Serves requests until the peer closes, a timeout, an error, or `stopping` is seen between
// requests. Never throws. The caller closes the socket.
// `bodies` bounds the request bodies that all connections hold at once.
void ServeConnection(Connection& conn, const HttpServerOptions& options, const HttpHandler& handler,
                     const std::atomic<bool>& stopping, ByteBudget& bodies);

// Answers 503 on a connection over max_connections. Never throws.
void RejectConnection(Connection& conn, const HttpServerOptions& options);

}  // namespace baton::service::http_internal
