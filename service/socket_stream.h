// A blocking Beast stream over a non-blocking TCP socket, with deadlines. Asio's synchronous
// socket calls have no timeouts (and loop on SO_RCVTIMEO), so every wait here is a poll()
// bounded by a deadline. Another thread may ::shutdown() the descriptor to wake a blocked
// read or write; it must never close it.
#pragma once

#include <chrono>
#include <cstddef>

#include "boost/asio/ip/tcp.hpp"
#include "boost/system/error_code.hpp"
#include "boost/system/system_error.hpp"

namespace baton::service::http_internal {

class SocketStream {
 public:
  using Clock = std::chrono::steady_clock;

  // `socket` must outlive the stream; it is switched to non-blocking mode.
  SocketStream(boost::asio::ip::tcp::socket& socket, std::chrono::milliseconds write_timeout);

  int fd() const { return fd_; }
  std::chrono::milliseconds write_timeout() const { return write_timeout_; }
  // Bytes received so far, to measure what a parser consumed.
  size_t bytes_read() const { return bytes_read_; }
  void set_read_deadline(Clock::time_point deadline) { read_deadline_ = deadline; }

  // Waits until bytes (or EOF, or an error) can be read, or `deadline` passes (false).
  bool WaitReadable(Clock::time_point deadline);

  // SyncReadStream and SyncWriteStream, as Beast and Asio expect them. Reads fail with
  // beast::error::timeout after the read deadline; a write fails with it when it makes no
  // progress for the write timeout.
  template <class MutableBufferSequence>
  size_t read_some(const MutableBufferSequence& buffers, boost::system::error_code& ec) {
    for (;;) {
      size_t n = socket_.read_some(buffers, ec);
      bytes_read_ += n;
      if (!WouldBlock(ec)) return n;
      if (!Wait(/*write=*/false, ec)) return 0;
    }
  }
  template <class ConstBufferSequence>
  size_t write_some(const ConstBufferSequence& buffers, boost::system::error_code& ec) {
    for (;;) {
      size_t n = socket_.write_some(buffers, ec);
      if (!WouldBlock(ec)) return n;
      if (!Wait(/*write=*/true, ec)) return 0;
    }
  }
  template <class MutableBufferSequence>
  size_t read_some(const MutableBufferSequence& buffers) {
    boost::system::error_code ec;
    size_t n = read_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }
  template <class ConstBufferSequence>
  size_t write_some(const ConstBufferSequence& buffers) {
    boost::system::error_code ec;
    size_t n = write_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }

  // Ends our side, then reads and discards what the peer still sends until it closes or
  // `linger` passes (0: only what has already arrived). Closing with unread bytes makes the
  // kernel reset the connection, which can destroy a response the peer has not read yet.
  // The caller closes the socket after.
  void ShutdownAndDrain(std::chrono::milliseconds linger);

 private:
  static bool WouldBlock(const boost::system::error_code& ec);
  // Polls until the socket is ready; false (with `ec` set) on timeout or poll failure.
  bool Wait(bool write, boost::system::error_code& ec);

  boost::asio::ip::tcp::socket& socket_;
  int fd_;
  std::chrono::milliseconds write_timeout_;
  Clock::time_point read_deadline_ = Clock::time_point::max();
  size_t bytes_read_ = 0;
};

// poll() on one descriptor, retried on EINTR. Returns revents, 0 on timeout, -1 on error.
int PollOne(int fd, short events, int timeout_ms);

}  // namespace baton::service::http_internal
