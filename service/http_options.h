// Limits and timeouts of the HTTP server, shared by the server and by ParseHttpRequest so
// that the fuzz target exercises exactly the limits the server enforces.
#pragma once

#include <openssl/ssl.h>

#include <cstddef>
#include <memory>
#include <string>

#include "service/byte_budget.h"

namespace baton::service {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;                     // 0: any free port (see HttpServer::port())
  size_t max_body_bytes = 8 << 20;  // larger: 413
  // Bodies of all requests in flight together (ByteBudget); past it: 429. 0: no bound.
  size_t max_inflight_body_bytes = 64 << 20;
  // The budget to take them from, shared with the process's other front doors (the router's
  // gRPC API); null: the server makes its own of max_inflight_body_bytes.
  std::shared_ptr<ByteBudget> bodies;
  size_t max_header_bytes = 64 << 10;  // request line plus fields; larger: 431
  int max_connections = 1024;          // more: 503 and close
  int idle_timeout_ms = 60000;         // keep-alive connection with no request
  int read_timeout_ms = 30000;         // time to receive a whole request; then 408
  int write_timeout_ms = 30000;        // a write that makes no progress this long fails
  // HTTPS with this context (ServerTlsContext); null: plaintext HTTP.
  std::shared_ptr<SSL_CTX> tls;
};

}  // namespace baton::service
