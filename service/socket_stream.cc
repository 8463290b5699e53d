#include "service/socket_stream.h"

#include <openssl/err.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include "boost/asio/error.hpp"
#include "boost/beast/core/error.hpp"

namespace baton::service::http_internal {
namespace {

int MillisUntil(SocketStream::Clock::time_point deadline) {
  auto now = SocketStream::Clock::now();
  if (deadline <= now) return 0;
  if (deadline == SocketStream::Clock::time_point::max()) return -1;
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
  return static_cast<int>(std::min<long long>(ms, 1 << 30));
}

}  // namespace

int PollOne(int fd, short events, int timeout_ms) {
  for (;;) {
    pollfd p{fd, events, 0};
    int r = ::poll(&p, 1, timeout_ms);
    if (r > 0) return p.revents;
    if (r == 0) return 0;
    if (errno != EINTR) return -1;
  }
}

SocketStream::SocketStream(boost::asio::ip::tcp::socket& socket,
                           std::chrono::milliseconds write_timeout, SSL_CTX* tls)
    : socket_(socket), fd_(socket.native_handle()), write_timeout_(write_timeout) {
  boost::system::error_code ec;
  socket_.non_blocking(true, ec);
  if (tls != nullptr) {
    ssl_ = SSL_new(tls);
    if (ssl_ != nullptr && SSL_set_fd(ssl_, fd_) == 1) {
      SSL_set_accept_state(ssl_);
      // Writes may be partial, and a retry may pass the same bytes at another address
      // (SendNoWait retries from a string that has grown).
      SSL_set_mode(ssl_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    }
  }
}

SocketStream::~SocketStream() {
  if (ssl_ != nullptr) SSL_free(ssl_);
}

bool SocketStream::Handshake(Clock::time_point deadline) {
  if (ssl_ == nullptr) return true;
  const Clock::time_point saved = read_deadline_;
  read_deadline_ = deadline;
  bool ok = false;
  for (;;) {
    ERR_clear_error();
    const int r = SSL_do_handshake(ssl_);
    if (r == 1) {
      ok = true;
      break;
    }
    boost::system::error_code ec;
    if (!TlsWait(SSL_get_error(ssl_, r), /*writing=*/false, ec)) break;
  }
  read_deadline_ = saved;
  return ok;
}

SocketStream::NoWait SocketStream::HandshakeNoWait() {
  if (ssl_ == nullptr) return NoWait::kDone;
  ERR_clear_error();
  const int r = SSL_do_handshake(ssl_);
  if (r == 1) return NoWait::kDone;
  const int error = SSL_get_error(ssl_, r);
  if (error == SSL_ERROR_WANT_READ) return NoWait::kWantRead;
  if (error == SSL_ERROR_WANT_WRITE) return NoWait::kWantWrite;
  return NoWait::kFailed;
}

SocketStream::NoWait SocketStream::ReadNoWait(std::string* out, size_t max) {
  char chunk[16384];
  while (out->size() < max) {
    const size_t want = std::min(sizeof(chunk), max - out->size());
    if (ssl_ != nullptr) {
      ERR_clear_error();
      errno = 0;
      const int n = SSL_read(ssl_, chunk, static_cast<int>(want));
      if (n > 0) {
        out->append(chunk, static_cast<size_t>(n));
        bytes_read_ += static_cast<size_t>(n);
        continue;
      }
      const int error = SSL_get_error(ssl_, n);
      if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) return NoWait::kWantRead;
      if (error == SSL_ERROR_ZERO_RETURN || (error == SSL_ERROR_SYSCALL && errno == 0)) {
        return NoWait::kDone;
      }
      return NoWait::kFailed;
    }
    const ssize_t n = ::recv(fd_, chunk, want, MSG_DONTWAIT);
    if (n > 0) {
      out->append(chunk, static_cast<size_t>(n));
      bytes_read_ += static_cast<size_t>(n);
    } else if (n == 0) {
      return NoWait::kDone;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return NoWait::kWantRead;
    } else if (errno != EINTR) {
      return NoWait::kFailed;
    }
  }
  return NoWait::kWantRead;
}

bool SocketStream::TlsWait(int error, bool writing, boost::system::error_code& ec) {
  if (error == SSL_ERROR_WANT_READ) return Wait(/*write=*/false, ec);
  if (error == SSL_ERROR_WANT_WRITE) return Wait(/*write=*/true, ec);
  if (error == SSL_ERROR_ZERO_RETURN || (error == SSL_ERROR_SYSCALL && errno == 0)) {
    // close_notify, or a FIN without it (a truncation Beast reports as such on a read).
    ec = writing ? boost::system::error_code(boost::asio::error::broken_pipe)
                 : boost::system::error_code(boost::asio::error::eof);
  } else if (error == SSL_ERROR_SYSCALL) {
    ec = boost::system::error_code(errno, boost::system::system_category());
  } else {
    ec = boost::system::error_code(boost::asio::error::connection_aborted);
  }
  return false;
}

size_t SocketStream::TlsIo(void* data, size_t size, bool writing, boost::system::error_code& ec) {
  ec = {};
  if (size == 0) return 0;
  const int len = static_cast<int>(std::min<size_t>(size, 1 << 30));
  for (;;) {
    ERR_clear_error();
    errno = 0;
    const int n = writing ? SSL_write(ssl_, data, len) : SSL_read(ssl_, data, len);
    if (n > 0) return static_cast<size_t>(n);
    if (!TlsWait(SSL_get_error(ssl_, n), writing, ec)) return 0;
  }
}

bool SocketStream::SendNoWait(std::string_view bytes, size_t* sent) {
  *sent = 0;
  if (bytes.empty()) return true;
  if (ssl_ != nullptr) {
    ERR_clear_error();
    errno = 0;
    const int n =
        SSL_write(ssl_, bytes.data(), static_cast<int>(std::min<size_t>(bytes.size(), 1 << 30)));
    if (n > 0) {
      *sent = static_cast<size_t>(n);
      return true;
    }
    const int error = SSL_get_error(ssl_, n);
    return error == SSL_ERROR_WANT_WRITE || error == SSL_ERROR_WANT_READ;
  }
  for (;;) {
    ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n >= 0) {
      *sent = static_cast<size_t>(n);
      return true;
    }
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
}

bool SocketStream::WouldBlock(const boost::system::error_code& ec) {
  return ec == boost::asio::error::would_block || ec == boost::asio::error::try_again;
}

bool SocketStream::Wait(bool write, boost::system::error_code& ec) {
  int timeout_ms = write ? static_cast<int>(write_timeout_.count()) : MillisUntil(read_deadline_);
  // POLLHUP and POLLERR wake us too; the next read or write then reports what happened.
  int r = timeout_ms == 0 ? 0 : PollOne(fd_, write ? POLLOUT : POLLIN, timeout_ms);
  if (r > 0) return true;
  ec = r == 0 ? boost::system::error_code(boost::beast::error::timeout)
              : boost::system::error_code(errno, boost::system::system_category());
  return false;
}

bool SocketStream::WaitReadable(Clock::time_point deadline) {
  if (ssl_ != nullptr && SSL_pending(ssl_) > 0) return true;
  int timeout_ms = MillisUntil(deadline);
  return timeout_ms != 0 && PollOne(fd_, POLLIN, timeout_ms) > 0;
}

void SocketStream::ShutdownAndDrain(std::chrono::milliseconds linger) {
  if (ssl_ != nullptr) {
    ERR_clear_error();
    SSL_shutdown(ssl_);  // our close_notify, without waiting for theirs
  }
  ::shutdown(fd_, SHUT_WR);
  const auto deadline = Clock::now() + linger;
  char scratch[16384];
  size_t drained = 0;
  // A client that keeps uploading is cut off after a bounded amount, reset or not.
  constexpr size_t kMaxDrainBytes = 16 << 20;
  while (drained < kMaxDrainBytes) {
    // With no time left this still takes what has already arrived.
    if (PollOne(fd_, POLLIN, MillisUntil(deadline)) <= 0) break;
    ssize_t n = ::recv(fd_, scratch, sizeof(scratch), MSG_DONTWAIT);
    if (n > 0) {
      drained += static_cast<size_t>(n);
    } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      break;
    }
  }
}

}  // namespace baton::service::http_internal
