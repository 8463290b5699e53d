// A blocking HTTP/1.1 test client over a raw loopback socket, with timeouts on every wait so
// that a broken server fails a test instead of hanging it. Responses are parsed with Beast.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "boost/asio/buffer.hpp"
#include "boost/beast/http/error.hpp"
#include "boost/beast/http/parser.hpp"
#include "boost/beast/http/string_body.hpp"

namespace baton::service::testing {

using Response = boost::beast::http::response<boost::beast::http::string_body>;

class TestClient {
 public:
  explicit TestClient(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) Close();
  }
  ~TestClient() { Close(); }
  TestClient(const TestClient&) = delete;
  TestClient& operator=(const TestClient&) = delete;

  bool connected() const { return fd_ >= 0; }
  int fd() const { return fd_; }

  bool Send(std::string_view bytes) {
    while (!bytes.empty()) {
      ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // Appends what arrives within `timeout` (at least one read) to the pending bytes; false on
  // EOF, error or timeout.
  bool ReadMore(std::chrono::milliseconds timeout) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return false;
    char buf[65536];
    ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) return false;
    pending_.append(buf, static_cast<size_t>(n));
    return true;
  }

  // Reads until `needle` has arrived; returns everything up to and including it, and keeps
  // the rest pending.
  std::optional<std::string> ReadUntil(std::string_view needle,
                                       std::chrono::milliseconds timeout = kTimeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      size_t pos = pending_.find(needle);
      if (pos != std::string::npos) {
        std::string out = pending_.substr(0, pos + needle.size());
        pending_.erase(0, pos + needle.size());
        return out;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || !ReadMore(left)) return std::nullopt;
    }
  }

  // One whole response (nullopt on timeout, EOF before its end, or a malformed response).
  std::optional<Response> ReadResponse(std::chrono::milliseconds timeout = kTimeout,
                                       bool head_request = false) {
    namespace http = boost::beast::http;
    http::response_parser<http::string_body> parser;
    parser.body_limit(1 << 30);
    parser.eager(true);
    parser.skip(head_request);
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      while (!pending_.empty() && !parser.is_done()) {
        boost::system::error_code ec;
        size_t used = parser.put(boost::asio::buffer(pending_), ec);
        pending_.erase(0, used);
        if (ec == http::error::need_more) break;
        if (ec) return std::nullopt;
      }
      if (parser.is_done()) return parser.release();
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      if (!ReadMore(left)) {
        boost::system::error_code ec;
        parser.put_eof(ec);  // close-delimited bodies end here
        if (ec || !parser.is_done()) return std::nullopt;
        return parser.release();
      }
    }
  }

  // True when the server closes the connection within `timeout` (bytes before it are kept).
  bool WaitClosed(std::chrono::milliseconds timeout = kTimeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
      char buf[4096];
      ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) return true;
      pending_.append(buf, static_cast<size_t>(n));
    }
  }

  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  const std::string& pending() const { return pending_; }

  static constexpr std::chrono::milliseconds kTimeout{5000};

 private:
  int fd_ = -1;
  std::string pending_;
};

}  // namespace baton::service::testing
