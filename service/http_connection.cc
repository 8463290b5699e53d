#include "service/http_connection.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <mutex>
#include <sstream>
#include <string>

#include "boost/asio/buffer.hpp"
#include "boost/asio/write.hpp"
#include "boost/beast/core/flat_buffer.hpp"
#include "boost/beast/core/string.hpp"
#include "boost/beast/http/empty_body.hpp"
#include "boost/beast/http/error.hpp"
#include "boost/beast/http/read.hpp"
#include "boost/beast/http/serializer.hpp"
#include "boost/beast/http/string_body.hpp"
#include "boost/beast/http/write.hpp"
#include "common/strings.h"
#include "service/http_error.h"
#include "service/request_parser.h"
#include "service/socket_stream.h"

namespace baton::service::http_internal {
namespace {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
using Clock = SocketStream::Clock;
using std::chrono::milliseconds;

// How long a connection closed mid-request (after an error response) waits for the peer to
// stop sending; after a whole request there is nothing more to wait for.
constexpr milliseconds kLinger(2000);
// How long a connection over the limit may take to send its request head before the 503.
constexpr milliseconds kRejectReadTimeout(1000);

beast::string_view Bsv(std::string_view s) { return beast::string_view(s.data(), s.size()); }

bool IsTokenChar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool IsHeaderName(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), IsTokenChar);
}

bool IsHeaderValue(std::string_view s) {
  return s.find_first_of(std::string_view("\r\n\0", 3)) == std::string_view::npos;
}

// Framing headers are the server's: a handler's copy could contradict the bytes it writes.
bool IsFramingHeader(std::string_view name) {
  return beast::iequals(Bsv(name), "content-length") ||
         beast::iequals(Bsv(name), "transfer-encoding") || beast::iequals(Bsv(name), "connection");
}

template <class Fields>
void SetHeaders(Fields& fields, std::string_view content_type, const HttpHeaders& headers) {
  fields.set(http::field::server, "baton");
  if (!content_type.empty() && IsHeaderValue(content_type)) {
    fields.set(http::field::content_type, Bsv(content_type));
  }
  for (const auto& [name, value] : headers) {
    if (IsHeaderName(name) && IsHeaderValue(value) && !IsFramingHeader(name)) {
      fields.insert(Bsv(name), Bsv(value));
    }
  }
}

bool IsValidStatus(int status) { return status >= 200 && status <= 599; }

class ConnectionResponder final : public HttpResponder {
 public:
  ConnectionResponder(SocketStream& stream, unsigned version, bool keep_alive, bool head,
                      const std::atomic<bool>& stopping)
      : stream_(stream),
        version_(version),
        keep_alive_(keep_alive),
        head_(head),
        stopping_(stopping) {}

  bool Send(int status, std::string_view content_type, std::string body,
            const HttpHeaders& headers) override {
    std::lock_guard<std::mutex> lock(out_mu_);  // against a probe (PeerClosed)
    if (state_ != State::kNone || failed_.load() || !IsValidStatus(status)) return false;
    state_ = State::kSent;
    try {
      http::response<http::string_body> res;
      res.version(version_);
      res.result(static_cast<unsigned>(status));
      SetHeaders(res, content_type, headers);
      keep_alive_ = keep_alive_ && !stopping_.load();  // a draining server says so
      res.keep_alive(keep_alive_);
      if (status != 204 && status != 304) {
        res.body() = std::move(body);
        res.prepare_payload();
      }
      http::response_serializer<http::string_body> serializer(res);
      beast::error_code ec;
      if (head_) {
        http::write_header(stream_, serializer, ec);
      } else {
        http::write(stream_, serializer, ec);
      }
      return ec ? Fail() : true;
    } catch (const std::exception&) {
      return Fail();
    }
  }

  bool StartStream(int status, std::string_view content_type, const HttpHeaders& headers) override {
    std::lock_guard<std::mutex> lock(out_mu_);  // against a probe (PeerClosed)
    if (state_ != State::kNone || failed_.load() || !IsValidStatus(status)) return false;
    state_ = State::kStreaming;
    try {
      http::response<http::empty_body> res;
      res.version(version_);
      res.result(static_cast<unsigned>(status));
      SetHeaders(res, content_type, headers);
      if (version_ >= 11) {
        chunked_ = true;
        res.chunked(true);
      } else {
        // HTTP/1.0 has no chunked encoding: the end of the body is the end of the connection.
        keep_alive_ = false;
      }
      keep_alive_ = keep_alive_ && !stopping_.load();
      res.keep_alive(keep_alive_);
      http::response_serializer<http::empty_body> serializer(res);
      beast::error_code ec;
      http::write_header(stream_, serializer, ec);
      return ec ? Fail() : true;
    } catch (const std::exception&) {
      return Fail();
    }
  }

  bool WriteChunk(std::string_view data) override {
    if (state_ != State::kStreaming || failed_.load()) return false;
    // An empty chunk would read as the end of the body.
    if (data.empty() || head_) return true;
    if (!Flush()) return false;  // what WriteChunkNoWait queued goes first
    beast::error_code ec;
    if (chunked_) {
      char size_line[24];
      int n = std::snprintf(size_line, sizeof(size_line), "%zx\r\n", data.size());
      std::array<net::const_buffer, 3> buffers = {net::const_buffer(size_line, n),
                                                  net::buffer(data.data(), data.size()),
                                                  net::const_buffer("\r\n", 2)};
      net::write(stream_, buffers, ec);
    } else {
      net::write(stream_, net::buffer(data.data(), data.size()), ec);
    }
    return ec ? Fail() : true;
  }

  bool EndStream() override {
    if (state_ != State::kStreaming || failed_.load()) return false;
    state_ = State::kEnded;
    if (!Flush()) return false;
    if (!chunked_ || head_) return true;
    beast::error_code ec;
    net::write(stream_, net::const_buffer("0\r\n\r\n", 5), ec);
    return ec ? Fail() : true;
  }

  NoWait WriteChunkNoWait(std::string_view data) override {
    if (state_ != State::kStreaming || failed_.load()) return NoWait::kFailed;
    if (data.empty() || head_) return NoWait::kSent;
    std::string frame;
    if (chunked_) {
      char size_line[24];
      int n = std::snprintf(size_line, sizeof(size_line), "%zx\r\n", data.size());
      frame.reserve(n + data.size() + 2);
      frame.append(size_line, n).append(data).append("\r\n");
    } else {
      frame.assign(data);
    }
    std::lock_guard<std::mutex> lock(out_mu_);
    if (!backlog_.empty()) {
      backlog_ += frame;
      return NoWait::kQueued;
    }
    size_t sent = 0;
    if (!SendNow(frame, &sent)) return NoWait::kFailed;
    if (sent == frame.size()) return NoWait::kSent;
    backlog_.assign(frame, sent);
    return NoWait::kQueued;
  }

  bool Flush() override {
    std::unique_lock<std::mutex> lock(out_mu_);
    while (!backlog_.empty()) {
      size_t sent = 0;
      if (!SendNow(backlog_, &sent)) return false;
      if (sent > 0) {
        backlog_.erase(0, sent);
        continue;
      }
      // Producers may queue more while this waits for the client.
      lock.unlock();
      const int r =
          PollOne(stream_.fd(), POLLOUT, static_cast<int>(stream_.write_timeout().count()));
      lock.lock();
      if (r <= 0) return Fail();
    }
    return !failed_.load();
  }

  bool PeerClosed() override {
    if (failed_.load()) return true;
    int revents = PollOne(stream_.fd(), POLLRDHUP, 0);
    if (revents < 0 || (revents & (POLLHUP | POLLERR | POLLNVAL)) != 0) return true;
    if ((revents & POLLRDHUP) == 0) return false;
    // The client sent FIN. It either closed its socket or only its sending side: a
    // half-close after a complete request, which must still get its answer (RFC 9112
    // §9.6). Only a write tells them apart: a closed socket answers it with RST, which the
    // next poll sees as POLLHUP/POLLERR. A streaming response's own writes do that; before
    // any response, an interim "100 Continue" does (every HTTP/1.1 client must skip 1xx
    // responses, RFC 9110 §15.2). HTTP/1.0 clients get no 1xx: FIN means gone.
    if (version_ < 11) return true;
    ProbeOnce();
    return false;
  }

  int PeerFd() const override { return stream_.fd(); }

  bool responded() const { return state_ != State::kNone; }
  // Whether the connection may carry another request after this response.
  bool reusable() const {
    return keep_alive_ && !failed_.load() && (state_ == State::kSent || state_ == State::kEnded);
  }

 private:
  enum class State { kNone, kSent, kStreaming, kEnded };

  bool Fail() {
    failed_.store(true);
    return false;
  }

  // Sends "100 Continue" once, if no response has begun and no write is in progress.
  void ProbeOnce() {
    if (probed_.exchange(true)) return;
    std::unique_lock<std::mutex> lock(out_mu_, std::try_to_lock);
    if (!lock.owns_lock() || state_ != State::kNone) return;  // a write will tell
    static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    size_t sent = 0;
    // A fresh response's socket buffer is empty; a part of the line would break the
    // framing, so a short send fails the connection.
    if (SendNow(kContinue, &sent) && sent != kContinue.size()) Fail();
  }

  // One write that never waits; *sent is 0 when the socket is full. False on an error.
  bool SendNow(std::string_view bytes, size_t* sent) {
    return stream_.SendNoWait(bytes, sent) || Fail();
  }

  SocketStream& stream_;
  const unsigned version_;
  bool keep_alive_;
  const bool head_;
  const std::atomic<bool>& stopping_;
  bool chunked_ = false;
  std::atomic<State> state_{State::kNone};  // read by PeerClosed() on other threads
  std::atomic<bool> failed_{false};
  std::atomic<bool> probed_{false};
  // WriteChunkNoWait against Flush; Send and StartStream against ProbeOnce.
  std::mutex out_mu_;
  std::string backlog_;  // framed bytes queued by WriteChunkNoWait
};

// A response the server writes itself, after which it closes the connection.
void SendErrorAndClose(SocketStream& stream, int status, std::string_view message,
                       std::string_view type, const HttpHeaders& headers = {}) {
  try {
    http::response<http::string_body> res;
    res.version(11);
    res.result(static_cast<unsigned>(status));
    SetHeaders(res, "application/json", headers);
    res.keep_alive(false);
    res.body() = OpenAiErrorJson(message, type);
    res.prepare_payload();
    beast::error_code ec;
    http::write(stream, res, ec);
  } catch (const std::exception&) {
    // Nothing more to tell a client we cannot write to.
  }
  stream.ShutdownAndDrain(kLinger);
}

bool IsQuietReadError(const beast::error_code& ec) {
  // The client went away before or while sending a request: there is no one to answer.
  return ec == http::error::end_of_stream || ec == http::error::partial_message ||
         ec.category() != http::make_error_code(http::error::end_of_stream).category();
}

void AnswerReadError(SocketStream& stream, const beast::error_code& ec, bool got_bytes,
                     const HttpServerOptions& options) {
  if (ec == beast::error::timeout) {
    if (got_bytes) {
      SendErrorAndClose(stream, 408, ReadTimeoutMessage(options), "invalid_request_error");
    }
    return;
  }
  if (IsQuietReadError(ec)) return;
  int status = ec == http::error::header_limit ? 431 : ec == http::error::body_limit ? 413 : 400;
  const absl::Status error = ParseErrorStatus(ec, options);
  SendErrorAndClose(stream, status,
                    std::string_view(error.message().data(), error.message().size()),
                    "invalid_request_error");
}

}  // namespace

bool HasRequestHead(std::string_view bytes) {
  // A request may follow empty lines (RFC 9112 §2.2); the head ends at the first empty line
  // after the request line.
  size_t start = 0;
  while (bytes.substr(start, 2) == "\r\n") start += 2;
  return bytes.find("\r\n\r\n", start) != std::string_view::npos;
}

std::string RemoteAddress(const net::ip::tcp::socket& socket) {
  beast::error_code ec;
  auto endpoint = socket.remote_endpoint(ec);
  if (ec) return "";
  auto address = endpoint.address();
  if (address.is_v6() && address.to_v6().is_v4_mapped()) {
    address = net::ip::make_address_v4(net::ip::v4_mapped, address.to_v6());
  }
  std::string host = address.to_string(ec);
  if (ec) return "";
  return address.is_v6() ? StrCat("[", host, "]:", endpoint.port())
                         : StrCat(host, ":", endpoint.port());
}

namespace {

// 429 for a body that does not fit in what the server lets all requests hold at once.
void AnswerOverBudget(SocketStream& stream, size_t bytes, const ByteBudget& bodies) {
  SendErrorAndClose(stream, 429,
                    StrCat("the server holds ", bodies.held(), " bytes of request bodies and ",
                           "this one adds ", bytes, "; the limit (--max-inflight-body-bytes) is ",
                           bodies.limit(), " bytes. Retry later"),
                    "requests", {{"Retry-After", "1"}});
}

AfterServe ServeLoop(Connection& conn, const HttpServerOptions& options, const HttpHandler& handler,
                     const std::atomic<bool>& stopping, ByteBudget& bodies) {
  SocketStream& stream = conn.stream;
  // Keeps pipelined bytes from one request to the next.
  beast::flat_buffer buffer;
  auto pending = buffer.prepare(conn.pending.size());
  std::memcpy(pending.data(), conn.pending.data(), conn.pending.size());
  buffer.commit(conn.pending.size());
  conn.pending.clear();
  Clock::time_point started = conn.request_started;
  for (;;) {
    const auto unread = buffer.data();
    if (!HasRequestHead(std::string_view(static_cast<const char*>(unread.data()), unread.size())) &&
        buffer.size() <= options.max_header_bytes) {
      // Wait for the rest of the head without a thread (RequestWaiter).
      conn.pending.assign(static_cast<const char*>(unread.data()), unread.size());
      conn.request_started = buffer.size() > 0 ? started : Clock::time_point::max();
      return stopping.load() ? AfterServe::kClose : AfterServe::kPark;
    }
    stream.set_read_deadline(std::min(started, Clock::now()) +
                             milliseconds(options.read_timeout_ms));
    started = Clock::time_point::max();  // a pipelined request's time counts from here

    RequestParser parser;
    ConfigureParser(parser, options);
    beast::error_code ec;
    // read_header stops right after the header, so this measures exactly its bytes.
    const size_t unparsed_before = buffer.size();
    const size_t read_before = stream.bytes_read();
    http::read_header(stream, buffer, parser, ec);
    if (!ec && HeaderTooLarge(unparsed_before + (stream.bytes_read() - read_before) - buffer.size(),
                              options)) {
      ec = http::error::header_limit;
    }
    if (!ec) {
      if (absl::Status te = CheckTransferEncoding(parser.get()); !te.ok()) {
        SendErrorAndClose(stream, te.code() == absl::StatusCode::kUnimplemented ? 501 : 400,
                          std::string_view(te.message().data(), te.message().size()),
                          "invalid_request_error");
        return AfterServe::kClose;
      }
    }
    // The body's bytes are taken from the shared budget before they are read when the
    // client says how many (Content-Length); a chunked body once it is read (it is bounded
    // by max_body_bytes meanwhile). Held until the handler has answered.
    std::optional<ByteBudget::Lease> body_lease;
    if (!ec && !parser.is_done() && parser.content_length().has_value()) {
      const size_t length = static_cast<size_t>(*parser.content_length());
      if (length <= options.max_body_bytes) {
        body_lease = bodies.TryTake(length);
        if (!body_lease) {
          AnswerOverBudget(stream, length, bodies);
          return AfterServe::kClose;
        }
      }
    }
    if (!ec && !parser.is_done()) {
      const auto& header = parser.get();
      if (header.version() >= 11 && beast::iequals(header[http::field::expect], "100-continue")) {
        constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
        net::write(stream, net::const_buffer(kContinue.data(), kContinue.size()), ec);
        if (ec) return AfterServe::kClose;
      }
      conn.body_since_ns.store(std::max<int64_t>(1, Clock::now().time_since_epoch().count()));
      http::read(stream, buffer, parser, ec);
      conn.body_since_ns.store(0);
    }
    if (ec && conn.evicted.load()) {
      SendErrorAndClose(stream, 503,
                        StrCat("the server is at its limit of ", options.max_connections,
                               " open connections and closed this one, the slowest to send its "
                               "request body; retry later"),
                        "server_error");
      return AfterServe::kClose;
    }
    if (ec) {
      AnswerReadError(stream, ec, parser.got_some() || buffer.size() > 0, options);
      return AfterServe::kClose;
    }

    if (!body_lease && !parser.get().body().empty()) {
      body_lease = bodies.TryTake(parser.get().body().size());
      if (!body_lease) {
        AnswerOverBudget(stream, parser.get().body().size(), bodies);
        return AfterServe::kClose;
      }
    }

    auto message = parser.release();
    const bool keep_alive = message.keep_alive();
    const bool head = message.method() == http::verb::head;
    const unsigned version = message.version();
    HttpRequest request = ToHttpRequest(std::move(message));
    if (FieldsTooLarge(request, options)) {
      AnswerReadError(stream, http::error::header_limit, true, options);
      return AfterServe::kClose;
    }
    request.remote = conn.remote;
    ConnectionResponder responder(stream, version, keep_alive, head, stopping);
    try {
      handler(request, responder);
    } catch (...) {
      // Falls through: a 500 if nothing was sent, else the connection is cut.
    }
    if (!responder.responded()) {
      responder.Send(500, "application/json",
                     OpenAiErrorJson("the server failed to produce a response", "server_error"),
                     {});
    }
    if (!responder.reusable()) {
      stream.ShutdownAndDrain(milliseconds(0));
      return AfterServe::kClose;
    }
  }
}

}  // namespace

AfterServe ServeConnection(Connection& conn, const HttpServerOptions& options,
                           const HttpHandler& handler, const std::atomic<bool>& stopping,
                           ByteBudget& bodies) {
  try {
    return ServeLoop(conn, options, handler, stopping, bodies);
  } catch (...) {
    // Only allocation failure gets here.
    return AfterServe::kClose;
  }
}

std::string ReadTimeoutMessage(const HttpServerOptions& options) {
  return StrCat("the request was not received within the read timeout of ", options.read_timeout_ms,
                " ms");
}

void SendErrorNoWait(Connection& conn, int status, std::string_view message) {
  try {
    http::response<http::string_body> res;
    res.version(11);
    res.result(static_cast<unsigned>(status));
    SetHeaders(res, "application/json", {});
    res.keep_alive(false);
    res.body() = OpenAiErrorJson(message, status == 408 ? "invalid_request_error" : "server_error");
    res.prepare_payload();
    std::ostringstream bytes;
    bytes << res;
    size_t sent = 0;
    conn.stream.SendNoWait(bytes.str(), &sent);
  } catch (const std::exception&) {
  }
  conn.stream.ShutdownAndDrain(milliseconds(0));
}

void RejectConnection(Connection& conn, const HttpServerOptions& options) {
  try {
    SocketStream& stream = conn.stream;
    stream.set_write_timeout(kRejectReadTimeout);
    // Reading the request head first keeps the 503 from racing the client's request.
    auto deadline =
        Clock::now() + std::min(kRejectReadTimeout, milliseconds(options.read_timeout_ms));
    if (!stream.Handshake(deadline)) return;
    stream.set_read_deadline(deadline);
    if (stream.WaitReadable(deadline)) {
      RequestParser parser;
      ConfigureParser(parser, options);
      beast::flat_buffer buffer;
      beast::error_code ec;
      http::read_header(stream, buffer, parser, ec);
    }
    SendErrorAndClose(stream, 503,
                      StrCat("the server is at its limit of ", options.max_connections,
                             " open connections; retry later"),
                      "server_error", {{"Retry-After", "1"}});
  } catch (...) {
  }
}

}  // namespace baton::service::http_internal
