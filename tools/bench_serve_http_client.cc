#include "tools/bench_serve_http_client.h"

#include <algorithm>
#include <exception>
#include <memory>
#include <optional>
#include <utility>

#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/post.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "common/status.h"
#include "common/strings.h"
#include "tools/http_call.h"

namespace baton::tools {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

constexpr size_t kMaxErrorBody = size_t{64} << 10;
constexpr size_t kReadChunk = 16 << 10;

// The flag to look at when a request times out.
std::string Describe(const beast::error_code& ec) {
  return DescribeHttpError(ec, " (see --request-timeout)");
}

}  // namespace

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

struct HttpBenchClient::Loop {
  asio::io_context ioc;
};

struct HttpBenchClient::Connection {
  explicit Connection(asio::io_context& ioc) : stream(ioc) {}
  beast::tcp_stream stream;
  beast::flat_buffer buffer;
};

// One request, from taking a connection to the end of its stream. Each step starts one
// asynchronous operation whose handler holds the exchange alive and runs the next step.
// Asynchronous operations carry the request's deadline (tcp_stream's expiry).
class HttpBenchClient::Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(HttpBenchClient* client, const BenchPrompt& prompt, Done done)
      : client_(client), done_(std::move(done)) {
    const HttpClientOptions& o = client_->options_;
    result_.prompt_len = prompt.prompt_len;
    req_ = {http::verb::post, StrCat(o.url.path, o.path), 11};
    req_.set(http::field::host, client_->host_header_);
    req_.set(http::field::user_agent, "baton-bench");
    req_.set(http::field::content_type, "application/json");
    req_.set(http::field::accept, "text/event-stream");
    if (!o.request.api_key.empty()) {
      req_.set(http::field::authorization, StrCat("Bearer ", o.request.api_key));
    }
    req_.keep_alive(true);
    req_.body() = BuildOpenAiBody(o, prompt);
    req_.prepare_payload();
    start_ = BenchClock::now();
    deadline_ = start_ + std::chrono::duration_cast<BenchClock::duration>(
                             std::chrono::duration<double>(o.request.timeout_s));
  }

  // Takes an idle connection, or opens one.
  void Begin() {
    if (!client_->idle_.empty()) {
      c_ = std::move(client_->idle_.back());
      client_->idle_.pop_back();
      reused_ = true;
      Write();
      return;
    }
    reused_ = false;
    resolver_.emplace(client_->loop_->ioc);
    const HttpUrl& url = client_->options_.url;
    resolver_->async_resolve(
        url.host, url.port,
        [self = shared_from_this()](beast::error_code ec,
                                    const asio::ip::tcp::resolver::results_type& endpoints) {
          self->Connect(ec, endpoints);
        });
  }

 private:
  void Connect(beast::error_code ec, const asio::ip::tcp::resolver::results_type& endpoints) {
    const HttpUrl& url = client_->options_.url;
    if (ec) return Fail(StrCat("cannot resolve ", url.host, ":", url.port, ": ", ec.message()));
    c_ = std::make_unique<Connection>(client_->loop_->ioc);
    c_->stream.expires_at(deadline_);
    c_->stream.async_connect(
        endpoints, [self = shared_from_this()](beast::error_code ec, const auto& /*endpoint*/) {
          if (ec) {
            return self->Fail(
                StrCat("cannot connect to ", self->client_->host_header_, ": ", Describe(ec)));
          }
          self->c_->stream.socket().set_option(asio::ip::tcp::no_delay(true), ec);
          self->Write();
        });
  }

  void Write() {
    c_->stream.expires_at(deadline_);
    http::async_write(c_->stream, req_,
                      [self = shared_from_this()](beast::error_code ec, size_t /*bytes*/) {
                        if (ec) return self->NoResponse(ec);
                        self->ReadHeader();
                      });
  }

  void ReadHeader() {
    parser_.emplace();
    parser_->body_limit(boost::none);  // a long stream is not an error
    http::async_read_header(c_->stream, c_->buffer, *parser_,
                            [self = shared_from_this()](beast::error_code ec, size_t /*bytes*/) {
                              if (ec) return self->NoResponse(ec);
                              self->OnHeader();
                            });
  }

  // A kept-alive connection may have been closed by the server while idle; that shows as
  // a failure before any response byte, and the request is sent once more on a new
  // connection.
  void NoResponse(beast::error_code ec) {
    if (reused_ && attempt_ == 0 && ec != beast::error::timeout) {
      ++attempt_;
      c_.reset();
      return Begin();
    }
    Fail(StrCat("no response from ", client_->host_header_, ": ", Describe(ec)));
  }

  void OnHeader() {
    status_ = parser_->get().result_int();
    if (status_ == 200) {
      const auto content_type = parser_->get()[http::field::content_type];
      if (!content_type.empty() && !content_type.starts_with("text/event-stream")) {
        stream_status_ = absl::InternalError(
            StrCat("the response is ", std::string_view(content_type.data(), content_type.size()),
                   ", not an event stream; does the server support \"stream\": true?"));
      }
    }
    stream_.emplace(client_->options_.api, start_);
    ReadBody();
  }

  void ReadBody() {
    if (parser_->is_done()) return End({});
    parser_->get().body().data = chunk_;
    parser_->get().body().size = sizeof(chunk_);
    http::async_read_some(c_->stream, c_->buffer, *parser_,
                          [self = shared_from_this()](beast::error_code ec, size_t /*bytes*/) {
                            const BenchClock::time_point read_at = BenchClock::now();
                            if (ec == http::error::need_buffer) ec = {};
                            if (ec) return self->End(ec);
                            if (self->OnBytes(read_at)) return self->ReadBody();
                            // The rest of a failed stream is of no interest, and the connection not
                            // reusable.
                            self->End({});
                          });
  }

  // The body bytes of the last read; false when the stream failed.
  bool OnBytes(BenchClock::time_point read_at) {
    const size_t n = sizeof(chunk_) - parser_->get().body().size;
    if (status_ != 200 || !stream_status_.ok()) {
      error_body_.append(chunk_,
                         std::min(n, kMaxErrorBody - std::min(kMaxErrorBody, error_body_.size())));
      return true;
    }
    stream_status_ = sse_.Feed(std::string_view(chunk_, n), [&](std::string_view data) {
      return stream_->OnEvent(data, read_at);
    });
    return stream_status_.ok();
  }

  void End(beast::error_code ec) {
    const BenchClock::time_point end = BenchClock::now();
    if (status_ != 200) {
      const std::string_view reason(parser_->get().reason().data(), parser_->get().reason().size());
      if (!ec && parser_->is_done() && parser_->keep_alive()) Release();
      return Fail(StrCat("HTTP ", status_, " ", reason, ": ", ErrorMessageFromBody(error_body_)));
    }
    if (!stream_status_.ok()) {
      if (!error_body_.empty()) return Fail(StrCat(stream_status_.message(), ": ", error_body_));
      return Fail(std::string(stream_status_.message()));
    }
    if (ec) return Fail(StrCat("the stream broke off: ", Describe(ec)));
    if (!stream_->done()) return Fail("the stream ended without data: [DONE]");
    stream_->Finish(end, &result_);
    result_.success = true;
    if (parser_->keep_alive()) Release();
    done_(std::move(result_));
  }

  void Release() {
    c_->stream.expires_never();
    client_->idle_.push_back(std::move(c_));
  }

  void Fail(std::string message) {
    result_.success = false;
    result_.error = std::move(message);
    result_.e2el_s = std::chrono::duration<double>(BenchClock::now() - start_).count();
    done_(std::move(result_));
  }

  HttpBenchClient* client_;
  Done done_;
  RequestResult result_;
  http::request<http::string_body> req_;
  BenchClock::time_point start_;
  BenchClock::time_point deadline_;
  std::optional<asio::ip::tcp::resolver> resolver_;
  std::unique_ptr<Connection> c_;
  bool reused_ = false;
  int attempt_ = 0;
  std::optional<http::response_parser<http::buffer_body>> parser_;
  unsigned status_ = 0;
  char chunk_[kReadChunk];
  std::string error_body_;
  std::optional<OpenAiStream> stream_;
  SseParser sse_;
  absl::Status stream_status_;
};

HttpBenchClient::HttpBenchClient(HttpClientOptions options)
    : options_(std::move(options)), loop_(std::make_unique<Loop>()) {
  host_header_ = HostHeader(options_.url);
}

HttpBenchClient::~HttpBenchClient() = default;

void HttpBenchClient::Start(const BenchPrompt& prompt, Done done) {
  std::make_shared<Exchange>(this, prompt, std::move(done))->Begin();
}

void HttpBenchClient::Post(std::function<void()> fn) { asio::post(loop_->ioc, std::move(fn)); }

void HttpBenchClient::Run() {
  // Without work the loop would return as soon as nothing is pending, e.g. between
  // arrivals; Stop() ends it instead.
  auto work = asio::make_work_guard(loop_->ioc);
  loop_->ioc.restart();
  loop_->ioc.run();
}

void HttpBenchClient::Stop() { loop_->ioc.stop(); }

absl::StatusOr<std::string> HttpBenchClient::FetchFirstModel() {
  return tools::FetchFirstModel(options_.url, options_.request.api_key, options_.request.timeout_s);
}

}  // namespace baton::tools
