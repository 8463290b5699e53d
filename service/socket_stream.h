// A blocking Beast stream over a non-blocking TCP socket, with deadlines, in plaintext or
// TLS (OpenSSL on the same descriptor). Asio's synchronous socket calls have no timeouts
// (and loop on SO_RCVTIMEO), so every wait here is a poll() bounded by a deadline. Another
// thread may ::shutdown() the descriptor to wake a blocked read or write; it must never
// close it.
#pragma once

#include <openssl/ssl.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

#include "boost/asio/buffer.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/system/error_code.hpp"
#include "boost/system/system_error.hpp"

namespace baton::service::http_internal {

class SocketStream {
 public:
  using Clock = std::chrono::steady_clock;

  // `socket` must outlive the stream; it is switched to non-blocking mode. With `tls`, the
  // stream speaks TLS once Handshake() has succeeded.
  SocketStream(boost::asio::ip::tcp::socket& socket, std::chrono::milliseconds write_timeout,
               SSL_CTX* tls = nullptr);
  ~SocketStream();
  SocketStream(const SocketStream&) = delete;
  SocketStream& operator=(const SocketStream&) = delete;

  bool tls() const { return ssl_ != nullptr; }
  // The server side of the TLS handshake, by `deadline`; true at once without TLS.
  bool Handshake(Clock::time_point deadline);
  // What a call that never waits achieved.
  enum class NoWait { kDone, kWantRead, kWantWrite, kFailed };
  // One step of the server side of the TLS handshake that never waits: kDone once it has
  // completed (at once without TLS), kWant* when the socket must become readable or
  // writable first.
  NoWait HandshakeNoWait();
  // Appends what can be read now, up to `max` bytes in all, to *out: kDone when the peer
  // has closed its side (EOF), kWantRead when nothing more is there yet (or `max` was
  // reached), kFailed on an error.
  NoWait ReadNoWait(std::string* out, size_t max);
  // One write that never waits: *sent is how much went (0 when the socket is full). False
  // on an error. With TLS, a retry after 0 must start with the same bytes.
  bool SendNoWait(std::string_view bytes, size_t* sent);

  int fd() const { return fd_; }
  std::chrono::milliseconds write_timeout() const { return write_timeout_; }
  void set_write_timeout(std::chrono::milliseconds timeout) { write_timeout_ = timeout; }
  // Bytes received so far, to measure what a parser consumed.
  size_t bytes_read() const { return bytes_read_; }
  void set_read_deadline(Clock::time_point deadline) { read_deadline_ = deadline; }

  // Waits until bytes (or EOF, or an error) can be read, or `deadline` passes (false).
  // Decrypted bytes TLS already holds count as readable.
  bool WaitReadable(Clock::time_point deadline);

  // SyncReadStream and SyncWriteStream, as Beast and Asio expect them. Reads fail with
  // beast::error::timeout after the read deadline; a write fails with it when it makes no
  // progress for the write timeout.
  template <class MutableBufferSequence>
  size_t read_some(const MutableBufferSequence& buffers, boost::system::error_code& ec) {
    if (ssl_ != nullptr) {
      const boost::asio::mutable_buffer first = *boost::asio::buffer_sequence_begin(buffers);
      const size_t n = TlsIo(first.data(), first.size(), /*writing=*/false, ec);
      bytes_read_ += n;
      return n;
    }
    for (;;) {
      size_t n = socket_.read_some(buffers, ec);
      bytes_read_ += n;
      if (!WouldBlock(ec)) return n;
      if (!Wait(/*write=*/false, ec)) return 0;
    }
  }
  template <class ConstBufferSequence>
  size_t write_some(const ConstBufferSequence& buffers, boost::system::error_code& ec) {
    if (ssl_ != nullptr) {
      // One TLS record for what Beast writes as several buffers (a chunk's size line, data
      // and CRLF), up to 16 KiB.
      std::string& joined = scratch_;
      joined.clear();
      for (auto it = boost::asio::buffer_sequence_begin(buffers);
           it != boost::asio::buffer_sequence_end(buffers) && joined.size() < kMaxRecord; ++it) {
        const boost::asio::const_buffer b = *it;
        joined.append(static_cast<const char*>(b.data()),
                      std::min(b.size(), kMaxRecord - joined.size()));
      }
      return TlsIo(joined.data(), joined.size(), /*writing=*/true, ec);
    }
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
  static constexpr size_t kMaxRecord = 16384;

  static bool WouldBlock(const boost::system::error_code& ec);
  // Polls until the socket is ready; false (with `ec` set) on timeout or poll failure.
  bool Wait(bool write, boost::system::error_code& ec);
  // One SSL_read or SSL_write, waiting as TLS asks until it moves bytes or fails.
  size_t TlsIo(void* data, size_t size, bool writing, boost::system::error_code& ec);
  // After an SSL call failed with `error`: waits as it asks (true) or sets `ec` (false).
  bool TlsWait(int error, bool writing, boost::system::error_code& ec);

  boost::asio::ip::tcp::socket& socket_;
  int fd_;
  std::chrono::milliseconds write_timeout_;
  Clock::time_point read_deadline_ = Clock::time_point::max();
  size_t bytes_read_ = 0;
  SSL* ssl_ = nullptr;
  std::string scratch_;
};

// poll() on one descriptor, retried on EINTR. Returns revents, 0 on timeout, -1 on error.
int PollOne(int fd, short events, int timeout_ms);

}  // namespace baton::service::http_internal
