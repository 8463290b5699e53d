#include "parallel/tcp_store.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/secret_token.h"
#include "common/status.h"
#include "common/strings.h"
#include "parallel/store_frame.h"

namespace baton::parallel {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kForever = Clock::time_point::max();

// Reads exactly `n` bytes by `deadline`. False on EOF, error or time out.
bool ReadFull(int fd, char* buf, size_t n, Clock::time_point deadline) {
  size_t got = 0;
  while (got < n) {
    int wait_ms = -1;
    if (deadline != kForever) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return false;
      wait_ms = static_cast<int>(std::min<int64_t>(left, 1 << 30));
    }
    pollfd p{fd, POLLIN, 0};
    const int ready = poll(&p, 1, wait_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return false;
    const ssize_t r = recv(fd, buf + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    got += static_cast<size_t>(r);
  }
  return true;
}

bool WriteFull(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t w = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data.remove_prefix(static_cast<size_t>(w));
  }
  return true;
}

bool WriteFrame(int fd, const std::string& body) {
  return WriteFull(fd, FrameHeader(body.size())) && WriteFull(fd, body);
}

// One frame's body. NotFound at a clean end of stream, InvalidArgument for a length past
// the limit (the peer is then cut off: its bytes cannot be trusted to resync), Unavailable
// for a broken or timed-out read.
absl::StatusOr<std::string> ReadFrame(int fd, Clock::time_point deadline) {
  char header[4];
  if (!ReadFull(fd, header, 4, deadline)) return absl::NotFoundError("group store: stream ended");
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i)
    n |= static_cast<uint32_t>(static_cast<uint8_t>(header[i])) << (8 * i);
  if (n == 0 || n > StoreFrameLimits::kMaxFrameBytes) {
    return absl::InvalidArgumentError(StrCat("group store: a frame of ", n,
                                             " bytes; it must be 1 to ",
                                             StoreFrameLimits::kMaxFrameBytes));
  }
  std::string body(n, '\0');
  if (!ReadFull(fd, body.data(), n, deadline)) {
    return absl::UnavailableError("group store: the connection broke inside a frame");
  }
  return body;
}

void Reply(int fd, absl::StatusCode code, std::string payload) {
  (void)WriteFrame(fd, EncodeStoreResponse({code, std::move(payload)}));
}

absl::StatusOr<addrinfo*> Resolve(const std::string& host, int port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  const std::string service = StrCat(port);
  const int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0) {
    return absl::UnavailableError(
        StrCat("group store: cannot resolve '", host, "': ", gai_strerror(rc)));
  }
  return res;
}

}  // namespace

absl::Status SplitHostPort(const std::string& address, const char* flag, std::string* host,
                           int* port) {
  const size_t colon = address.rfind(':');
  const auto bad = [&] {
    return absl::InvalidArgumentError(
        StrCat(flag, " is '", address, "'; give the leader as HOST:PORT, e.g. 10.0.0.5:29500"));
  };
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) return bad();
  *host = address.substr(0, colon);
  if (host->size() > 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  int p = 0;
  for (char c : address.substr(colon + 1)) {
    if (c < '0' || c > '9') return bad();
    p = p * 10 + (c - '0');
    if (p > 65535) return bad();
  }
  *port = p;
  return absl::OkStatus();
}

// ---- server ----

absl::StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Start(
    const TcpStoreServerOptions& o) {
  if (o.token.size() < kMinTokenBytes || o.token.size() > kMaxTokenBytes) {
    return absl::InvalidArgumentError(
        StrCat("the group token is ", o.token.size(), " bytes; it must be ", kMinTokenBytes, " to ",
               kMaxTokenBytes,
               " (write random bytes to the --internal-token-file every rank reads, e.g. "
               "`head -c 32 /dev/urandom | base64 > token`)"));
  }
  std::unique_ptr<TcpStoreServer> s(new TcpStoreServer(o));
  BATON_ASSIGN_OR_RETURN(addrinfo * res, Resolve(o.host, o.port, true));
  absl::Status bound = absl::UnavailableError(StrCat("group store: no address for ", o.host));
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 128) == 0) {
      sockaddr_storage addr{};
      socklen_t len = sizeof(addr);
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
      s->port_ =
          ntohs(addr.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port
                                           : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
      s->listen_fd_ = fd;
      bound = absl::OkStatus();
      break;
    }
    bound = absl::UnavailableError(StrCat("the group leader cannot listen on ", o.host, ":", o.port,
                                          ": ", std::strerror(errno),
                                          "; is --group-leader this host's address and the port "
                                          "free?"));
    close(fd);
  }
  freeaddrinfo(res);
  BATON_RETURN_IF_ERROR(bound);
  s->accept_ = std::thread([p = s.get()] { p->AcceptLoop(); });
  return s;
}

TcpStoreServer::~TcpStoreServer() {
  std::unique_lock<std::mutex> lock(mu_);
  stop_ = true;
  shutdown(listen_fd_, SHUT_RDWR);
  for (const auto& [fd, unused] : open_fds_) shutdown(fd, SHUT_RDWR);
  changed_.notify_all();
  changed_.wait(lock, [&] { return connections_ == 0; });
  lock.unlock();
  accept_.join();
  close(listen_fd_);
}

int64_t TcpStoreServer::refused() const {
  std::lock_guard<std::mutex> lock(mu_);
  return refused_;
}

void TcpStoreServer::AcceptLoop() {
  while (true) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    std::unique_lock<std::mutex> lock(mu_);
    if (stop_) {
      if (fd >= 0) close(fd);
      return;
    }
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE) {
        lock.unlock();
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        continue;
      }
      return;
    }
    if (connections_ >= options_.max_connections) {
      ++refused_;
      lock.unlock();
      // Read the caller's first frame before answering: closing with its bytes unread
      // would reset the connection, and the caller would see a broken pipe instead of the
      // reason. Bounded, so that refusals cannot hold up the accept loop for long.
      (void)ReadFrame(fd, Clock::now() + std::chrono::milliseconds(100));
      Reply(fd, absl::StatusCode::kResourceExhausted,
            StrCat("the group store serves at most ", options_.max_connections, " connections"));
      close(fd);
      continue;
    }
    ++connections_;
    open_fds_[fd] = true;
    lock.unlock();
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::thread([this, fd] {
      Serve(fd);
      std::lock_guard<std::mutex> l(mu_);
      open_fds_.erase(fd);
      close(fd);
      --connections_;
      changed_.notify_all();
    }).detach();
  }
}

bool TcpStoreServer::Authenticate(int fd) {
  absl::StatusOr<std::string> body = ReadFrame(fd, Clock::now() + options_.hello_timeout);
  absl::StatusOr<StoreRequest> hello =
      body.ok() ? DecodeStoreRequest(*body) : absl::StatusOr<StoreRequest>(body.status());
  if (hello.ok() && hello->op == StoreOp::kHello && TokenMatches(hello->token, options_.token)) {
    Reply(fd, absl::StatusCode::kOk, "");
    return true;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++refused_;
  }
  Reply(fd, absl::StatusCode::kUnauthenticated,
        "the group store needs the group's token first; do all ranks read the same "
        "--internal-token-file?");
  return false;
}

void TcpStoreServer::Serve(int fd) {
  if (!Authenticate(fd)) return;
  while (true) {
    absl::StatusOr<std::string> body = ReadFrame(fd, kForever);
    if (!body.ok()) {
      if (absl::IsInvalidArgument(body.status())) {
        Reply(fd, absl::StatusCode::kInvalidArgument, std::string(body.status().message()));
      }
      return;
    }
    absl::StatusOr<StoreRequest> req = DecodeStoreRequest(*body);
    if (!req.ok()) {
      Reply(fd, absl::StatusCode::kInvalidArgument, std::string(req.status().message()));
      return;
    }
    switch (req->op) {
      case StoreOp::kHello:
        Reply(fd, absl::StatusCode::kOk, "");
        break;
      case StoreOp::kSet: {
        absl::Status s = Set(req->key, req->value);
        Reply(fd, s.code(), std::string(s.message()));
        break;
      }
      case StoreOp::kGet: {
        absl::StatusOr<std::string> v = Get(req->key, std::chrono::milliseconds(req->wait_ms));
        if (v.ok()) {
          Reply(fd, absl::StatusCode::kOk, *std::move(v));
        } else {
          Reply(fd, v.status().code(), std::string(v.status().message()));
        }
        break;
      }
    }
  }
}

absl::Status TcpStoreServer::Set(const std::string& key, std::string_view value) {
  if (key.empty() || key.size() > StoreFrameLimits::kMaxKeyBytes ||
      value.size() > StoreFrameLimits::kMaxValueBytes) {
    return absl::InvalidArgumentError(StrCat("group store: key of ", key.size(), " and value of ",
                                             value.size(), " bytes; the limits are ",
                                             StoreFrameLimits::kMaxKeyBytes, " and ",
                                             StoreFrameLimits::kMaxValueBytes));
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = values_.find(key);
  const size_t old_bytes = it == values_.end() ? 0 : key.size() + it->second.size();
  if (it == values_.end() && values_.size() >= options_.max_keys) {
    return absl::ResourceExhaustedError(StrCat("group store: it holds ", values_.size(),
                                               " keys; the limit is ", options_.max_keys));
  }
  const size_t new_total = total_bytes_ - old_bytes + key.size() + value.size();
  if (new_total > options_.max_total_bytes) {
    return absl::ResourceExhaustedError(StrCat(
        "group store: ", new_total, " bytes would pass the limit of ", options_.max_total_bytes));
  }
  total_bytes_ = new_total;
  values_[key] = std::string(value);
  changed_.notify_all();
  return absl::OkStatus();
}

absl::StatusOr<std::string> TcpStoreServer::Get(const std::string& key,
                                                std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  const bool found = changed_.wait_for(lock, timeout, [&] { return stop_ || values_.count(key); });
  if (found && !stop_) return values_[key];
  if (stop_) return absl::CancelledError("group store: the leader is stopping");
  return absl::DeadlineExceededError(StrCat("group store: no rank published '", key, "' in ",
                                            timeout.count(),
                                            " ms; is every rank of the group running?"));
}

// ---- client ----

absl::StatusOr<std::unique_ptr<TcpStore>> TcpStore::Connect(const std::string& leader,
                                                            const std::string& token,
                                                            std::chrono::milliseconds timeout) {
  std::string host;
  int port = 0;
  BATON_RETURN_IF_ERROR(SplitHostPort(leader, "--group-leader", &host, &port));
  const auto deadline = Clock::now() + timeout;
  std::unique_ptr<TcpStore> s(new TcpStore());
  s->leader_ = leader;
  std::string last = "not tried";
  while (s->fd_ < 0) {
    absl::StatusOr<addrinfo*> res = Resolve(host, port, false);
    if (res.ok()) {
      for (addrinfo* a = *res; a != nullptr && s->fd_ < 0; a = a->ai_next) {
        const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
          s->fd_ = fd;
        } else {
          last = std::strerror(errno);
          close(fd);
        }
      }
      freeaddrinfo(*res);
    } else {
      last = std::string(res.status().message());
    }
    if (s->fd_ >= 0) break;
    if (Clock::now() >= deadline) {
      return absl::DeadlineExceededError(StrCat("cannot reach the group leader at ", leader, " in ",
                                                timeout.count(), " ms (", last,
                                                "); is rank 0 running with this --group-leader?"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const int one = 1;
  setsockopt(s->fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  getsockname(s->fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  char buf[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&addr)->sin6_addr, buf, sizeof(buf));
  } else {
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&addr)->sin_addr, buf, sizeof(buf));
  }
  s->local_address_ = buf;
  StoreRequest hello;
  hello.op = StoreOp::kHello;
  hello.token = token;
  absl::StatusOr<std::string> ok = s->Call(EncodeStoreRequest(hello), timeout);
  if (!ok.ok()) {
    return absl::Status(ok.status().code(),
                        StrCat("the group leader at ", leader, ": ", ok.status().message()));
  }
  return s;
}

TcpStore::~TcpStore() {
  if (fd_ >= 0) close(fd_);
}

absl::StatusOr<std::string> TcpStore::Call(const std::string& body,
                                           std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!WriteFrame(fd_, body)) {
    return absl::UnavailableError(StrCat("group store: the leader at ", leader_, " is gone"));
  }
  absl::StatusOr<std::string> frame = ReadFrame(fd_, Clock::now() + timeout);
  if (!frame.ok()) {
    return absl::UnavailableError(StrCat("group store: no answer from the leader at ", leader_,
                                         " (", frame.status().message(), ")"));
  }
  BATON_ASSIGN_OR_RETURN(StoreResponse resp, DecodeStoreResponse(*frame));
  if (resp.code != absl::StatusCode::kOk) return absl::Status(resp.code, resp.payload);
  return std::move(resp.payload);
}

absl::Status TcpStore::Set(const std::string& key, std::string_view value) {
  StoreRequest r;
  r.op = StoreOp::kSet;
  r.key = key;
  r.value = std::string(value);
  return Call(EncodeStoreRequest(r), std::chrono::seconds(30)).status();
}

absl::StatusOr<std::string> TcpStore::Get(const std::string& key,
                                          std::chrono::milliseconds timeout) {
  StoreRequest r;
  r.op = StoreOp::kGet;
  r.key = key;
  r.wait_ms =
      static_cast<uint32_t>(std::min<int64_t>(timeout.count(), StoreFrameLimits::kMaxWaitMs));
  // The leader answers when the key is set or the wait ends; allow for the round trip.
  return Call(EncodeStoreRequest(r), timeout + std::chrono::seconds(10));
}

}  // namespace baton::parallel
