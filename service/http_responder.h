// The handler of HTTP requests, and how it answers one request: a whole response, or a
// stream of chunks.
//
//   void Handle(const HttpRequest& req, HttpResponder& out) {
//     if (!out.StartStream(200, "text/event-stream")) return;
//     for (const std::string& event : events) {
//       if (!out.WriteChunk(event)) return;  // the client is gone
//     }
//     out.EndStream();
//   }
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "service/http_error.h"  // handlers answer errors in the server's envelope
#include "service/http_request.h"

namespace baton::service {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

// One per request. The handler's thread (or one thread at a time that it hands the responder
// to) writes; PeerClosed() may be called from any thread while the handler runs. The server
// sets Server, Content-Length / Transfer-Encoding and Connection itself; headers with names or
// values that would break the framing (CR, LF, NUL, non-token names) are dropped.
class HttpResponder {
 public:
  virtual ~HttpResponder() = default;

  // A whole response with Content-Length. False when the client is gone or a response was
  // already started.
  virtual bool Send(int status, std::string_view content_type, std::string body,
                    const HttpHeaders& headers = {}) = 0;

  // A streamed response: chunked transfer encoding for HTTP/1.1, close-delimited for 1.0.
  virtual bool StartStream(int status, std::string_view content_type,
                           const HttpHeaders& headers = {}) = 0;
  // False once the client is gone (or a write made no progress for write_timeout_ms).
  virtual bool WriteChunk(std::string_view data) = 0;
  virtual bool EndStream() = 0;

  // For a producer on another thread (a gRPC callback) that must never wait on a slow
  // client. Frames `data` as the next chunk and sends what the socket takes at once; the
  // rest stays queued, in order, until Flush() (or the next WriteChunk/EndStream) sends it.
  // It may run concurrently with Flush(), but not with the other writing calls: between
  // StartStream and the final WriteChunk/EndStream, use only these two.
  enum class NoWait { kSent, kQueued, kFailed };
  virtual NoWait WriteChunkNoWait(std::string_view data) = 0;
  // Sends everything queued, waiting for the socket; false once the client is gone (or no
  // progress for write_timeout_ms).
  virtual bool Flush() = 0;

  // True once the peer has closed its side of the connection, a write failed, or the server
  // is closing the connection. Cheap and non-blocking; bytes the client pipelined do not count.
  virtual bool PeerClosed() = 0;
  // The connection's socket, for waiting on a hang-up (CancelWatcher) instead of polling
  // PeerClosed(); -1 when there is none. Open until the handler returns.
  virtual int PeerFd() const { return -1; }
};

// Called on the connection's thread, once per request. It may block for as long as the
// response takes (minutes of streamed tokens), but must return once a write fails or
// PeerClosed() is true: HttpServer::Shutdown waits for it. An exception, or returning
// without a response, gets the client a 500.
using HttpHandler = std::function<void(const HttpRequest&, HttpResponder&)>;

}  // namespace baton::service
