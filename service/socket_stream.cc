#include "service/socket_stream.h"

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
                           std::chrono::milliseconds write_timeout)
    : socket_(socket), fd_(socket.native_handle()), write_timeout_(write_timeout) {
  boost::system::error_code ec;
  socket_.non_blocking(true, ec);
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
  int timeout_ms = MillisUntil(deadline);
  return timeout_ms != 0 && PollOne(fd_, POLLIN, timeout_ms) > 0;
}

void SocketStream::ShutdownAndDrain(std::chrono::milliseconds linger) {
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
