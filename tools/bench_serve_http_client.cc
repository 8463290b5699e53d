#include "tools/bench_serve_http_client.h"

#include <algorithm>
#include <exception>
#include <utility>

#include "boost/asio/ip/tcp.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "common/status.h"
#include "common/strings.h"

namespace baton::tools {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

constexpr size_t kMaxErrorBody = size_t{64} << 10;
constexpr size_t kMaxModelsBody = size_t{4} << 20;
constexpr size_t kReadChunk = 16 << 10;

std::string Describe(const beast::error_code& ec) {
  if (ec == beast::error::timeout) return "timed out (see --request-timeout)";
  if (ec == http::error::end_of_stream || ec == asio::error::eof) {
    return "the server closed the connection";
  }
  return ec.message();
}

}  // namespace

// Each connection owns its io_context, so that the thread holding it can run its
// asynchronous operations to completion alone: asynchronous only because tcp_stream's
// timeouts (the request deadline) work on asynchronous operations only.
struct HttpBenchClient::Connection {
  asio::io_context ioc;
  beast::tcp_stream stream{ioc};
  beast::flat_buffer buffer;

  // Starts an operation with `start(handler)` and runs it to its end or the deadline.
  template <typename Start>
  beast::error_code Run(BenchClock::time_point deadline, Start start) {
    beast::error_code result;
    stream.expires_at(deadline);
    start([&result](beast::error_code ec, auto&&...) { result = ec; });
    ioc.restart();
    ioc.run();
    return result;
  }
};

absl::StatusOr<HttpUrl> ParseHttpUrl(std::string_view url) {
  constexpr std::string_view kScheme = "http://";
  if (url.starts_with("https://")) {
    return absl::InvalidArgumentError(
        StrCat("--base-url ", url, ": https is not supported; use http:// (or a TLS proxy)"));
  }
  if (!url.starts_with(kScheme)) {
    return absl::InvalidArgumentError(
        StrCat("--base-url ", url, " must start with http:// (e.g. http://127.0.0.1:8000)"));
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
      return absl::InvalidArgumentError(StrCat("--base-url ", url, ": unclosed '[' in the host"));
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
    return absl::InvalidArgumentError(
        StrCat("--base-url ", url, " is not http://HOST[:PORT][/PATH]"));
  }
  return out;
}

std::string BuildOpenAiBody(const HttpClientOptions& options, const BenchPrompt& prompt) {
  const RequestOptions& r = options.request;
  nlohmann::ordered_json body;
  if (!r.model.empty()) body["model"] = r.model;
  if (options.api == OpenAiApi::kChat) {
    body["messages"] = {{{"role", "user"}, {"content", prompt.text}}};
  } else if (r.send_token_ids && !prompt.token_ids.empty()) {
    body["prompt"] = prompt.token_ids;
  } else {
    body["prompt"] = prompt.text;
  }
  body["max_tokens"] = prompt.output_len;
  body["temperature"] = r.temperature;
  if (r.ignore_eos) body["ignore_eos"] = true;
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  for (const auto& [key, value] : options.extra_body.items()) body[key] = value;
  // Random token text can hold invalid UTF-8 only if the tokenizer produced it; replace
  // rather than throw.
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

HttpBenchClient::HttpBenchClient(HttpClientOptions options) : options_(std::move(options)) {
  const bool ipv6 = options_.url.host.find(':') != std::string::npos;
  host_header_ = ipv6 ? StrCat("[", options_.url.host, "]:", options_.url.port)
                      : StrCat(options_.url.host, ":", options_.url.port);
}

HttpBenchClient::~HttpBenchClient() = default;

absl::StatusOr<std::unique_ptr<HttpBenchClient::Connection>> HttpBenchClient::Connect(
    BenchClock::time_point deadline) {
  auto c = std::make_unique<Connection>();
  asio::ip::tcp::resolver resolver(c->ioc);
  beast::error_code ec;
  auto endpoints = resolver.resolve(options_.url.host, options_.url.port, ec);
  if (ec) {
    return absl::UnavailableError(
        StrCat("cannot resolve ", options_.url.host, ":", options_.url.port, ": ", ec.message()));
  }
  ec = c->Run(deadline, [&](auto handler) { c->stream.async_connect(endpoints, handler); });
  if (ec) {
    return absl::UnavailableError(StrCat("cannot connect to ", host_header_, ": ", Describe(ec)));
  }
  c->stream.socket().set_option(asio::ip::tcp::no_delay(true), ec);
  return c;
}

absl::StatusOr<std::unique_ptr<HttpBenchClient::Connection>> HttpBenchClient::Acquire(
    BenchClock::time_point deadline, bool* reused) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      std::unique_ptr<Connection> c = std::move(idle_.back());
      idle_.pop_back();
      *reused = true;
      return c;
    }
  }
  *reused = false;
  return Connect(deadline);
}

void HttpBenchClient::Release(std::unique_ptr<Connection> connection) {
  std::lock_guard<std::mutex> lock(mu_);
  idle_.push_back(std::move(connection));
}

RequestResult HttpBenchClient::Send(const BenchPrompt& prompt) {
  RequestResult result;
  result.prompt_len = prompt.prompt_len;
  http::request<http::string_body> req{http::verb::post, StrCat(options_.url.path, options_.path),
                                       11};
  req.set(http::field::host, host_header_);
  req.set(http::field::user_agent, "baton-bench");
  req.set(http::field::content_type, "application/json");
  req.set(http::field::accept, "text/event-stream");
  if (!options_.request.api_key.empty()) {
    req.set(http::field::authorization, StrCat("Bearer ", options_.request.api_key));
  }
  req.keep_alive(true);
  req.body() = BuildOpenAiBody(options_, prompt);
  req.prepare_payload();

  const BenchClock::time_point start = BenchClock::now();
  const BenchClock::time_point deadline =
      start + std::chrono::duration_cast<BenchClock::duration>(
                  std::chrono::duration<double>(options_.request.timeout_s));
  auto fail = [&](std::string message) {
    result.success = false;
    result.error = std::move(message);
    result.e2el_s = std::chrono::duration<double>(BenchClock::now() - start).count();
    return result;
  };

  // A kept-alive connection may have been closed by the server while idle; that shows
  // as a failure before any response byte, and the request is sent once more on a new
  // connection.
  for (int attempt = 0;; ++attempt) {
    bool reused = false;
    auto acquired = Acquire(deadline, &reused);
    if (!acquired.ok()) return fail(std::string(acquired.status().message()));
    std::unique_ptr<Connection> c = std::move(acquired).value();
    const bool may_retry = reused && attempt == 0;

    beast::error_code ec =
        c->Run(deadline, [&](auto handler) { http::async_write(c->stream, req, handler); });
    http::response_parser<http::buffer_body> parser;
    parser.body_limit(boost::none);  // a long stream is not an error
    if (!ec) {
      ec = c->Run(deadline, [&](auto handler) {
        http::async_read_header(c->stream, c->buffer, parser, handler);
      });
    }
    if (ec) {
      if (may_retry && ec != beast::error::timeout) continue;
      return fail(StrCat("no response from ", host_header_, ": ", Describe(ec)));
    }

    const unsigned status = parser.get().result_int();
    char chunk[kReadChunk];
    std::string error_body;
    OpenAiStream stream(options_.api, start);
    SseParser sse;
    absl::Status stream_status;
    if (status == 200) {
      const auto content_type = parser.get()[http::field::content_type];
      if (!content_type.empty() && !content_type.starts_with("text/event-stream")) {
        stream_status = absl::InternalError(
            StrCat("the response is ", std::string_view(content_type.data(), content_type.size()),
                   ", not an event stream; does the server support \"stream\": true?"));
      }
    }
    while (!parser.is_done()) {
      parser.get().body().data = chunk;
      parser.get().body().size = sizeof(chunk);
      ec = c->Run(deadline, [&](auto handler) {
        http::async_read_some(c->stream, c->buffer, parser, handler);
      });
      const BenchClock::time_point read_at = BenchClock::now();
      if (ec == http::error::need_buffer) ec = {};
      if (ec) break;
      const size_t n = sizeof(chunk) - parser.get().body().size;
      if (status != 200 || !stream_status.ok()) {
        error_body.append(chunk,
                          std::min(n, kMaxErrorBody - std::min(kMaxErrorBody, error_body.size())));
        continue;
      }
      stream_status = sse.Feed(std::string_view(chunk, n), [&](std::string_view data) {
        return stream.OnEvent(data, read_at);
      });
      // The rest of a failed stream is of no interest, and the connection not reusable.
      if (!stream_status.ok()) break;
    }
    const BenchClock::time_point end = BenchClock::now();
    if (status != 200) {
      if (!ec && parser.is_done() && parser.keep_alive()) Release(std::move(c));
      return fail(
          StrCat("HTTP ", status, " ",
                 std::string_view(parser.get().reason().data(), parser.get().reason().size()), ": ",
                 ErrorMessageFromBody(error_body)));
    }
    if (!stream_status.ok()) {
      if (!error_body.empty()) return fail(StrCat(stream_status.message(), ": ", error_body));
      return fail(std::string(stream_status.message()));
    }
    if (ec) return fail(StrCat("the stream broke off: ", Describe(ec)));
    if (!stream.done()) return fail("the stream ended without data: [DONE]");
    stream.Finish(end, &result);
    result.success = true;
    if (parser.keep_alive()) Release(std::move(c));
    return result;
  }
}

absl::StatusOr<std::string> HttpBenchClient::FetchFirstModel() {
  const BenchClock::time_point deadline =
      BenchClock::now() + std::chrono::duration_cast<BenchClock::duration>(
                              std::chrono::duration<double>(options_.request.timeout_s));
  BATON_ASSIGN_OR_RETURN(std::unique_ptr<Connection> c, Connect(deadline));
  http::request<http::empty_body> req{http::verb::get, StrCat(options_.url.path, "/v1/models"), 11};
  req.set(http::field::host, host_header_);
  req.set(http::field::user_agent, "baton-bench");
  if (!options_.request.api_key.empty()) {
    req.set(http::field::authorization, StrCat("Bearer ", options_.request.api_key));
  }
  http::response_parser<http::string_body> parser;
  parser.body_limit(kMaxModelsBody);
  beast::error_code ec =
      c->Run(deadline, [&](auto handler) { http::async_write(c->stream, req, handler); });
  if (!ec) {
    ec = c->Run(deadline,
                [&](auto handler) { http::async_read(c->stream, c->buffer, parser, handler); });
  }
  const std::string url = StrCat("http://", host_header_, options_.url.path, "/v1/models");
  if (ec) return absl::UnavailableError(StrCat("GET ", url, ": ", Describe(ec)));
  const std::string& body = parser.get().body();
  if (parser.get().result_int() != 200) {
    return absl::UnavailableError(StrCat("GET ", url, ": HTTP ", parser.get().result_int(), ": ",
                                         ErrorMessageFromBody(body), "; or give --model"));
  }
  try {
    const nlohmann::json models = nlohmann::json::parse(body);
    const auto& id = models.at("data").at(0).at("id");
    if (id.is_string() && !id.get_ref<const std::string&>().empty()) return id.get<std::string>();
  } catch (const std::exception&) {
    // Handled below, with the body in the message.
  }
  return absl::InvalidArgumentError(
      StrCat("GET ", url, " listed no model id (", body.substr(0, 200), "); give --model"));
}

}  // namespace baton::tools
