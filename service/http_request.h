// One parsed HTTP request, and the pure parser the server and the fuzz target share.
//
//   absl::StatusOr<HttpRequest> r = ParseHttpRequest("GET /v1/models HTTP/1.1\r\n\r\n", {});
//   if (r.ok()) Use(r->path, r->Header("authorization"));
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "service/http_options.h"

namespace baton::service {

struct HttpRequest {
  std::string method;                                        // "GET", "POST", ... as sent
  std::string target;                                        // as sent, e.g. "/v1/models?x=1"
  std::string path;                                          // target without the query
  int version = 11;                                          // 10 or 11
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased, in order
  std::string body;                                          // de-chunked
  std::string remote;  // "ip:port" of the peer; empty from ParseHttpRequest

  // The first value of a header, "" when absent. `lower_name` must be lower-case.
  std::string_view Header(std::string_view lower_name) const;
};

// Parses one request from `bytes` (bytes after it are ignored). InvalidArgument when
// malformed or incomplete; ResourceExhausted naming the limit when the header or the body is
// larger than `limits` allows.
absl::StatusOr<HttpRequest> ParseHttpRequest(std::string_view bytes,
                                             const HttpServerOptions& limits);

}  // namespace baton::service
