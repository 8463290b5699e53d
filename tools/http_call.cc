#include "tools/http_call.h"

#include <algorithm>
#include <exception>

#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "common/strings.h"
#include "nlohmann/json.hpp"
#include "tools/bench_serve_sse.h"

namespace baton::tools {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

constexpr size_t kMaxModelsBody = size_t{4} << 20;

}  // namespace

std::string DescribeHttpError(const boost::system::error_code& ec, std::string_view timeout_hint) {
  if (ec == beast::error::timeout) return StrCat("timed out", timeout_hint);
  if (ec == http::error::end_of_stream || ec == asio::error::eof) {
    return "the server closed the connection";
  }
  if (ec == http::error::body_limit) return "the response is larger than this client reads";
  return ec.message();
}

absl::StatusOr<HttpUrl> ParseHttpUrl(std::string_view url, std::string_view flag) {
  constexpr std::string_view kScheme = "http://";
  if (url.starts_with("https://")) {
    return absl::InvalidArgumentError(
        StrCat(flag, " ", url, ": https is not supported; use http:// (or a TLS proxy)"));
  }
  if (!url.starts_with(kScheme)) {
    return absl::InvalidArgumentError(
        StrCat(flag, " ", url, " must start with http:// (e.g. http://127.0.0.1:8000)"));
  }
  std::string_view rest = url.substr(kScheme.size());
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  HttpUrl out;
  if (slash != std::string_view::npos) out.path = std::string(rest.substr(slash));
  while (!out.path.empty() && out.path.back() == '/') out.path.pop_back();
  std::string_view port;
  if (authority.starts_with('[')) {  // [::1]:8000
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) {
      return absl::InvalidArgumentError(StrCat(flag, " ", url, ": unclosed '[' in the host"));
    }
    out.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (after.starts_with(':')) port = after.substr(1);
  } else {
    const size_t colon = authority.rfind(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  out.port = port.empty() ? "80" : std::string(port);
  if (out.host.empty() ||
      !std::all_of(out.port.begin(), out.port.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return absl::InvalidArgumentError(StrCat(flag, " ", url, " is not http://HOST[:PORT][/PATH]"));
  }
  return out;
}

std::string HostHeader(const HttpUrl& url) {
  const bool ipv6 = url.host.find(':') != std::string::npos;
  return ipv6 ? StrCat("[", url.host, "]:", url.port) : StrCat(url.host, ":", url.port);
}

absl::StatusOr<HttpReply> HttpCall(const HttpUrl& url, const HttpCallOptions& options) {
  const std::string host = HostHeader(url);
  const std::string target = StrCat(url.path, options.path);
  const std::string where = StrCat(options.method, " http://", host, target);
  asio::io_context ioc;
  asio::ip::tcp::resolver resolver(ioc);
  beast::error_code ec;
  auto endpoints = resolver.resolve(url.host, url.port, ec);
  if (ec) {
    return absl::UnavailableError(
        StrCat("cannot resolve ", url.host, ":", url.port, ": ", ec.message()));
  }
  const bool post = options.method == "POST";
  http::request<http::string_body> req{post ? http::verb::post : http::verb::get, target, 11};
  req.set(http::field::host, host);
  req.set(http::field::user_agent, options.user_agent);
  if (post) {
    req.set(http::field::content_type, "application/json");
    req.body() = options.body;
  }
  if (!options.api_key.empty()) {
    req.set(http::field::authorization, StrCat("Bearer ", options.api_key));
  }
  req.prepare_payload();
  beast::tcp_stream stream(ioc);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(options.max_body_bytes);
  // Asynchronous only because tcp_stream's timeouts work on asynchronous operations only.
  stream.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(options.timeout_s)));
  stream.async_connect(endpoints, [&](beast::error_code e, const auto& /*endpoint*/) {
    if ((ec = e)) return;
    http::async_write(stream, req, [&](beast::error_code e, size_t /*bytes*/) {
      if ((ec = e)) return;
      http::async_read(stream, buffer, parser,
                       [&](beast::error_code e, size_t /*bytes*/) { ec = e; });
    });
  });
  ioc.run();
  if (ec) return absl::UnavailableError(StrCat(where, ": ", DescribeHttpError(ec)));
  return HttpReply{.status = static_cast<int>(parser.get().result_int()),
                   .body = std::move(parser.get().body())};
}

absl::StatusOr<std::string> FetchFirstModel(const HttpUrl& url, const std::string& api_key,
                                            double timeout_s) {
  const std::string where = StrCat("GET http://", HostHeader(url), url.path, "/v1/models");
  HttpCallOptions get;
  get.path = "/v1/models";
  get.api_key = api_key;
  get.timeout_s = timeout_s;
  get.max_body_bytes = kMaxModelsBody;
  auto reply = HttpCall(url, get);
  if (!reply.ok()) return reply.status();
  if (reply->status != 200) {
    return absl::UnavailableError(StrCat(where, ": HTTP ", reply->status, ": ",
                                         ErrorMessageFromBody(reply->body), "; or give --model"));
  }
  try {
    const nlohmann::json models = nlohmann::json::parse(reply->body);
    const auto& id = models.at("data").at(0).at("id");
    if (id.is_string() && !id.get_ref<const std::string&>().empty()) return id.get<std::string>();
  } catch (const std::exception&) {
    // Handled below, with the body in the message.
  }
  return absl::InvalidArgumentError(
      StrCat(where, " listed no model id (", reply->body.substr(0, 200), "); give --model"));
}

}  // namespace baton::tools
