// One blocking HTTP/1.1 call on a fresh connection, for commands that make a single
// request and wait for it (`baton trace`, the model lookup of `baton bench serve`).
//
//   HttpCallOptions post;
//   post.method = "POST";
//   post.path = "/v1/completions";
//   post.body = json;
//   BATON_ASSIGN_OR_RETURN(HttpReply r, HttpCall(url, post));
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "boost/system/error_code.hpp"

namespace baton::tools {

struct HttpUrl {
  std::string host;  // without IPv6 brackets
  std::string port;
  std::string path;  // "" or "/prefix" (never a trailing slash)
};

// "http://host[:port][/path]"; https is refused (there is no TLS client here). `flag`
// names the option the URL came from, for the messages.
absl::StatusOr<HttpUrl> ParseHttpUrl(std::string_view url, std::string_view flag = "--base-url");

// "host:port", with brackets around an IPv6 host.
std::string HostHeader(const HttpUrl& url);

struct HttpCallOptions {
  std::string method = "GET";  // GET or POST
  std::string path;            // appended to the URL's path
  std::string body;            // POST: sent as application/json
  std::string api_key;         // sent as "authorization: Bearer <key>" when not empty
  double timeout_s = 600;      // connect to the last byte of the response
  size_t max_body_bytes = size_t{64} << 20;
  std::string user_agent = "baton";
};

struct HttpReply {
  int status = 0;
  std::string body;
};

// A transport failure of an HTTP client in words ("timed out", "the server closed the
// connection", ...); `timeout_hint` follows "timed out" (e.g. " (see --request-timeout)").
std::string DescribeHttpError(const boost::system::error_code& ec,
                              std::string_view timeout_hint = "");

// Connects, sends, reads the whole response. A transport failure (no connection, time
// out, a body over max_body_bytes) is Unavailable naming the URL; any HTTP status is a
// reply.
absl::StatusOr<HttpReply> HttpCall(const HttpUrl& url, const HttpCallOptions& options);

// GET <url>/v1/models and return the first model's id (what vLLM's clients do when no
// model is given).
absl::StatusOr<std::string> FetchFirstModel(const HttpUrl& url, const std::string& api_key,
                                            double timeout_s);

}  // namespace baton::tools
