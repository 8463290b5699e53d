// A small OpenAI-compatible HTTP server for the benchmark client's tests: it streams
// canned SSE chunks with set delays, in pieces as small as one byte, and counts how many
// requests it is serving at once. POSIX sockets, a thread per connection, 127.0.0.1:0.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "nlohmann/json.hpp"

namespace baton::tools::testing {

class FakeOpenAiServer {
 public:
  struct Behavior {
    int status = 200;
    std::string error_body = "";               // body of a non-200 response
    int chunks = 5;                            // content-bearing chunks
    std::chrono::milliseconds first_delay{0};  // before the first content chunk
    std::chrono::milliseconds chunk_delay{0};  // between content chunks
    bool usage = true;
    int prompt_tokens = 7;
    int completion_tokens = -1;  // -1: the number of chunks
    int cached_tokens = 3;
    bool done = true;        // end with data: [DONE]
    bool chunked = true;     // chunked encoding and keep-alive; else Connection: close
    size_t write_piece = 0;  // write the response in pieces of this many bytes (0: whole)
    std::chrono::microseconds piece_delay{0};
    std::string error_event = "";       // sent (as an error object) after the content chunks
    bool close_after_response = false;  // close a kept-alive connection once idle
    std::string content_type = "text/event-stream";
  };

  explicit FakeOpenAiServer(Behavior behavior) : behavior_(std::move(behavior)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    ::listen(listen_fd_, 128);
    socklen_t len = sizeof(addr);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { AcceptLoop(); });
  }

  ~FakeOpenAiServer() {
    stopping_ = true;
    acceptor_.join();
    ::close(listen_fd_);
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
      threads.swap(threads_);
    }
    for (std::thread& t : threads) t.join();
    for (int fd : open_fds_) ::close(fd);
  }

  int port() const { return port_; }
  int max_active() const { return max_active_; }
  int connections() const { return connections_; }
  int requests() const { return requests_; }
  std::vector<std::string> bodies() const {
    std::lock_guard<std::mutex> lock(mu_);
    return bodies_;
  }
  std::vector<std::string> heads() const {
    std::lock_guard<std::mutex> lock(mu_);
    return heads_;
  }

 private:
  void AcceptLoop() {
    while (!stopping_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      const int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) continue;
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      ++connections_;
      std::lock_guard<std::mutex> lock(mu_);
      open_fds_.push_back(fd);
      threads_.emplace_back([this, fd] { Serve(fd); });
    }
  }

  // Reads one request; false when the peer closed.
  bool ReadRequest(int fd, std::string* pending, std::string* head, std::string* body) {
    size_t end;
    while ((end = pending->find("\r\n\r\n")) == std::string::npos) {
      if (!ReadMore(fd, pending)) return false;
    }
    *head = pending->substr(0, end);
    size_t length = 0;
    std::string lower = *head;
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    if (size_t at = lower.find("content-length:"); at != std::string::npos) {
      length = std::stoul(lower.substr(at + 15));
    }
    pending->erase(0, end + 4);
    while (pending->size() < length) {
      if (!ReadMore(fd, pending)) return false;
    }
    *body = pending->substr(0, length);
    pending->erase(0, length);
    return true;
  }

  static bool ReadMore(int fd, std::string* pending) {
    char buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return false;
    pending->append(buf, static_cast<size_t>(n));
    return true;
  }

  void Write(int fd, const std::string& bytes) {
    const size_t piece = behavior_.write_piece == 0 ? bytes.size() : behavior_.write_piece;
    for (size_t at = 0; at < bytes.size(); at += piece) {
      const size_t n = std::min(piece, bytes.size() - at);
      if (::send(fd, bytes.data() + at, n, MSG_NOSIGNAL) < 0) return;
      if (behavior_.piece_delay.count() > 0) std::this_thread::sleep_for(behavior_.piece_delay);
    }
  }

  // One SSE event, framed for the transfer encoding in use.
  std::string Event(const std::string& data) const {
    const std::string event = "data: " + data + "\n\n";
    if (!behavior_.chunked) return event;
    char size[32];
    std::snprintf(size, sizeof(size), "%zx\r\n", event.size());
    return size + event + "\r\n";
  }

  void Serve(int fd) {
    std::string pending;
    for (;;) {
      std::string head, body;
      if (!ReadRequest(fd, &pending, &head, &body)) break;
      {
        std::lock_guard<std::mutex> lock(mu_);
        heads_.push_back(head);
        bodies_.push_back(body);
      }
      ++requests_;
      const int now = ++active_;
      int seen = max_active_;
      while (now > seen && !max_active_.compare_exchange_weak(seen, now)) {
      }
      if (head.starts_with("GET /v1/models")) {
        const std::string models = R"({"object":"list","data":[{"id":"fake-model"}]})";
        --active_;
        Write(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                      std::to_string(models.size()) + "\r\n\r\n" + models);
        continue;
      }
      if (!Respond(fd, body)) break;
      if (behavior_.close_after_response) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        break;
      }
    }
    ::shutdown(fd, SHUT_RDWR);
  }

  // Streams the canned response. The active count drops before the final bytes go out,
  // so that a client that has read them can never meet its own earlier request still
  // counted.
  bool Respond(int fd, const std::string& body) {
    const Behavior& b = behavior_;
    if (b.status != 200) {
      --active_;
      Write(fd, "HTTP/1.1 " + std::to_string(b.status) +
                    " Bad Request\r\nContent-Type: application/json\r\nContent-Length: " +
                    std::to_string(b.error_body.size()) + "\r\n\r\n" + b.error_body);
      return true;
    }
    const bool chat = body.find("\"messages\"") != std::string::npos;
    std::string head = "HTTP/1.1 200 OK\r\nContent-Type: " + b.content_type + "\r\n";
    head += b.chunked ? "Transfer-Encoding: chunked\r\n\r\n" : "Connection: close\r\n\r\n";
    Write(fd, head);
    if (chat) {
      // A role-only first chunk, as OpenAI and vLLM send: no content, so no first token.
      Write(
          fd,
          Event(
              R"({"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]})"));
    }
    std::this_thread::sleep_for(b.first_delay);
    for (int i = 0; i < b.chunks; ++i) {
      if (i > 0) std::this_thread::sleep_for(b.chunk_delay);
      const std::string piece = "tok" + std::to_string(i) + " ";
      nlohmann::json chunk;
      if (chat) {
        chunk = {{"object", "chat.completion.chunk"},
                 {"choices", {{{"index", 0}, {"delta", {{"content", piece}}}}}}};
      } else {
        chunk = {{"object", "text_completion"},
                 {"choices", {{{"index", 0}, {"text", piece}, {"finish_reason", nullptr}}}}};
      }
      Write(fd, Event(chunk.dump()));
    }
    if (!b.error_event.empty()) {
      Write(fd, Event(nlohmann::json{{"error", {{"message", b.error_event}}}}.dump()));
    }
    if (b.usage) {
      const int completion = b.completion_tokens >= 0 ? b.completion_tokens : b.chunks;
      nlohmann::json usage = {{"choices", nlohmann::json::array()},
                              {"usage",
                               {{"prompt_tokens", b.prompt_tokens},
                                {"completion_tokens", completion},
                                {"total_tokens", b.prompt_tokens + completion},
                                {"prompt_tokens_details", {{"cached_tokens", b.cached_tokens}}}}}};
      Write(fd, Event(usage.dump()));
    }
    if (b.done) Write(fd, Event("[DONE]"));
    --active_;
    if (b.chunked) {
      Write(fd, "0\r\n\r\n");
      return true;
    }
    return false;  // Connection: close: the end of the body is the end of the connection
  }

  const Behavior behavior_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  mutable std::mutex mu_;
  std::vector<std::thread> threads_;
  std::vector<int> open_fds_;
  std::vector<std::string> heads_;
  std::vector<std::string> bodies_;
  std::atomic<int> active_{0};
  std::atomic<int> max_active_{0};
  std::atomic<int> connections_{0};
  std::atomic<int> requests_{0};
};

}  // namespace baton::tools::testing
