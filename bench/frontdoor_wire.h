// What frontdoor_bench's clients send and read, shared by the clients that block one thread
// per stream and those that run every stream on one loop: the request each path sends, and
// a check of one request's events against what the stub wrote (count, order, token id or
// text, the final event), with the time each was read.
//
//   StreamCheck check(expected, "r1", 128, &received);
//   while (reader->Read(&msg)) check.OnDirect(msg, Clock::now());
//   BATON_RETURN_IF_ERROR(check.Finish());
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "baton/internal/v1/worker.pb.h"
#include "baton/v1/baton.pb.h"
#include "bench/frontdoor_stamps.h"
#include "boost/asio/ip/tcp.hpp"
#include "boost/beast/http/message.hpp"
#include "boost/beast/http/string_body.hpp"
#include "grpcpp/grpcpp.h"
#include "service/grpc_status.h"

namespace baton::bench {

// Event i of every request carries token id ids[i] and, through the router, the text
// texts[i] (never empty, so that each event is one delta). Sized for the longest request.
struct ExpectedStream {
  std::vector<int32_t> ids;
  std::vector<std::string> texts;
};

// The requests: one prompt token (direct) or "hello" (router), greedy, `tokens` events.
baton::internal::v1::GenerateRequest DirectRequest(const ExpectedStream& expected,
                                                   const std::string& request_id, int tokens);
baton::v1::GenerateRequest RouterGrpcRequest(const std::string& request_id, int tokens);
// POST /v1/completions with "stream": true, on a kept-alive connection.
boost::beast::http::request<boost::beast::http::string_body> SseRequest(
    int port, const std::string& request_id, int tokens);

// HTTP: each read of an SSE body takes up to this many bytes; an error body is kept up to
// kMaxErrorBody.
inline constexpr size_t kSseReadBytes = 16 << 10;
inline constexpr size_t kMaxErrorBody = 4 << 10;

// Connects `socket` to the router's HTTP port on 127.0.0.1, with TCP_NODELAY: requests are
// single writes, and the client adds no delay of its own.
absl::Status ConnectToRouter(boost::asio::ip::tcp::socket& socket, int port);

// A channel with a connection of its own: channels with equal arguments share one by
// default, and separate users do not.
std::shared_ptr<grpc::Channel> OwnChannel(int port);
using service::FromGrpcStatus;

class StreamCheck {
 public:
  // `expected` and `received` must outlive the check; read times are appended to *received.
  StreamCheck(const ExpectedStream& expected, std::string request_id, int tokens,
              std::vector<Clock::time_point>* received);

  // One message of baton.internal.v1.Worker/Generate: exactly one token.
  void OnDirect(const baton::internal::v1::GenerateResponse& msg, Clock::time_point t);
  // One message of baton.v1.Baton/Generate. The router merges the deltas that pile up while a
  // write is in flight, so a message may carry several tokens; each counts as read with it.
  void OnRouterGrpc(const baton::v1::GenerateResponse& msg, Clock::time_point t);
  // Bytes of a 200 SSE body, in whatever pieces the socket gave them. The router writes
  // each event as "data: <json>\n\n" and ends with "data: [DONE]".
  void OnSseBytes(std::string_view bytes, Clock::time_point t);

  // False once an event was wrong: a reader still drains its stream, but checks no more.
  bool ok() const { return status_.ok(); }
  // After the stream ended: the first error, else whether every event (and, on SSE,
  // [DONE]) arrived.
  absl::Status Finish() const;

 private:
  // Event index_ of the request; the wire forms pass what they carry, nullopt otherwise.
  absl::Status CheckNext(const int32_t* token_id, const std::string_view* text, bool finished,
                         std::string_view finish_reason) const;
  absl::Status Fail(std::string_view what) const;
  void OnSseEvent(std::string_view event, Clock::time_point t);

  const ExpectedStream& expected_;
  const std::string request_id_;
  const int tokens_;
  std::vector<Clock::time_point>* received_;
  int index_ = 0;
  absl::Status status_;
  bool sse_ = false;
  bool sse_done_ = false;
  std::string sse_pending_;  // bytes of an event not yet complete
};

}  // namespace baton::bench
