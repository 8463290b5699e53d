// HTTP/1.1 server on Boost.Beast: an acceptor thread, one epoll thread that holds every
// connection between requests (RequestWaiter: idle keep-alive clients and request heads
// still arriving cost no thread), and a thread per request being answered, so that a
// handler may block for minutes while it streams tokens.
//
//   HttpServerOptions options;
//   options.port = 8080;
//   BATON_ASSIGN_OR_RETURN(std::unique_ptr<HttpServer> server,
//                          HttpServer::Start(options, [](const HttpRequest& req,
//                                                        HttpResponder& out) {
//                            out.Send(200, "text/plain", "hello\n");
//                          }));
//   ...
//   server->Shutdown(absl::Seconds(30));  // on SIGTERM
//
// The server answers some requests itself, without calling the handler, with an OpenAI error
// envelope and Connection: close: malformed (400), too slow (408), body over max_body_bytes
// (413), bodies in flight over max_inflight_body_bytes (429), header over max_header_bytes
// (431), connections over max_connections (503).
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "service/http_options.h"
#include "service/http_request.h"
#include "service/http_responder.h"

namespace baton::service {

class HttpServer {
 public:
  // Listens on options.host:options.port and starts accepting.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(HttpServerOptions options,
                                                           HttpHandler handler);
  ~HttpServer();  // Shutdown()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const;
  // Open connections, waiting for a request or being answered (not counting those being
  // turned away with 503).
  int open_connections() const;

  // The first step of a drain: the server goes on accepting and answering, but every
  // response says Connection: close and ends its connection (the handler decides what
  // to answer: a draining router sends 503 with Retry-After). Thread-safe.
  void BeginDrain();

  // Stops accepting, closes idle keep-alive connections, lets running requests finish for up
  // to `grace` (their responses say Connection: close), then shuts down the remaining sockets,
  // so that writes fail and PeerClosed() turns true, and waits for their handlers to return.
  // Idempotent and thread-safe.
  void Shutdown(absl::Duration grace = absl::Seconds(5));

 private:
  struct Impl;
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace baton::service
