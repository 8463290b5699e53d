#include "bench/frontdoor_clients.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <exception>
#include <utility>

#include "baton/internal/v1/worker.grpc.pb.h"
#include "baton/v1/baton.grpc.pb.h"
#include "boost/asio/connect.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/beast/core/flat_buffer.hpp"
#include "boost/beast/http/buffer_body.hpp"
#include "boost/beast/http/read.hpp"
#include "boost/beast/http/string_body.hpp"
#include "boost/beast/http/write.hpp"
#include "common/status.h"
#include "common/strings.h"

namespace baton::bench {
namespace {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
using net::ip::tcp;

// baton.internal.v1.Worker/Generate on the stub: the path without a router.
class DirectClient final : public StreamClient {
 public:
  DirectClient(int port, const ExpectedStream* e)
      : expected_(*e), stub_(baton::internal::v1::Worker::NewStub(OwnChannel(port))) {}

  absl::Status Run(const std::string& request_id, int tokens,
                   std::vector<Clock::time_point>* received) override {
    const baton::internal::v1::GenerateRequest req = DirectRequest(expected_, request_id, tokens);
    grpc::ClientContext ctx;
    auto reader = stub_->Generate(&ctx, req);
    baton::internal::v1::GenerateResponse msg;
    StreamCheck check(expected_, request_id, tokens, received);
    // Drained to the end even after an error, so that Finish does not block.
    while (reader->Read(&msg)) check.OnDirect(msg, Clock::now());
    BATON_RETURN_IF_ERROR(FromGrpcStatus(reader->Finish(), StrCat("direct Generate ", request_id)));
    return check.Finish();
  }

 private:
  const ExpectedStream& expected_;
  std::unique_ptr<baton::internal::v1::Worker::Stub> stub_;
};

// baton.v1.Baton/Generate through the router.
class GrpcClient final : public StreamClient {
 public:
  GrpcClient(int port, const ExpectedStream* e)
      : expected_(*e), stub_(baton::v1::Baton::NewStub(OwnChannel(port))) {}

  absl::Status Run(const std::string& request_id, int tokens,
                   std::vector<Clock::time_point>* received) override {
    const baton::v1::GenerateRequest req = RouterGrpcRequest(request_id, tokens);
    grpc::ClientContext ctx;
    auto reader = stub_->Generate(&ctx, req);
    baton::v1::GenerateResponse msg;
    StreamCheck check(expected_, request_id, tokens, received);
    while (reader->Read(&msg)) check.OnRouterGrpc(msg, Clock::now());
    BATON_RETURN_IF_ERROR(FromGrpcStatus(reader->Finish(), StrCat("router Generate ", request_id)));
    return check.Finish();
  }

 private:
  const ExpectedStream& expected_;
  std::unique_ptr<baton::v1::Baton::Stub> stub_;
};

// POST /v1/completions with "stream": true through the router, over one kept-alive
// connection. Blocking Beast calls: one thread per stream, like the server's side.
class HttpClient final : public StreamClient {
 public:
  HttpClient(int port, const ExpectedStream* e, bool quickack)
      : expected_(*e), port_(port), quickack_(quickack), socket_(ioc_) {}

  absl::Status Connect() { return ConnectToRouter(socket_, port_); }

  absl::Status Run(const std::string& request_id, int tokens,
                   std::vector<Clock::time_point>* received) override {
    try {
      return RunOrThrow(request_id, tokens, received);
    } catch (const std::exception& e) {
      return absl::InternalError(StrCat("request ", request_id, ": ", e.what()));
    }
  }

 private:
  absl::Status RunOrThrow(const std::string& request_id, int tokens,
                          std::vector<Clock::time_point>* received) {
    const http::request<http::string_body> req = SseRequest(port_, request_id, tokens);
    beast::error_code ec;
    http::write(socket_, req, ec);
    if (ec) return absl::UnavailableError(StrCat("send ", request_id, ": ", ec.message()));

    http::response_parser<http::buffer_body> parser;
    parser.body_limit(boost::none);
    http::read_header(socket_, buffer_, parser, ec);
    if (ec) return absl::UnavailableError(StrCat("response to ", request_id, ": ", ec.message()));
    const unsigned status = parser.get().result_int();

    char chunk[kSseReadBytes];
    std::string error_body;
    StreamCheck check(expected_, request_id, tokens, received);
    while (!parser.is_done()) {
      if (quickack_) {
        const int one = 1;
        setsockopt(socket_.native_handle(), IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one));
      }
      parser.get().body().data = chunk;
      parser.get().body().size = sizeof(chunk);
      http::read_some(socket_, buffer_, parser, ec);
      const Clock::time_point t = Clock::now();
      if (ec == http::error::need_buffer) ec = {};
      if (ec) break;
      const size_t n = sizeof(chunk) - parser.get().body().size;
      if (status != 200) {
        error_body.append(chunk, std::min(n, kMaxErrorBody - error_body.size()));
      } else {
        check.OnSseBytes(std::string_view(chunk, n), t);
      }
    }
    if (ec) return absl::UnavailableError(StrCat("stream of ", request_id, ": ", ec.message()));
    if (status != 200) {
      return absl::InternalError(
          StrCat("request ", request_id, ": HTTP ", status, ": ", error_body));
    }
    BATON_RETURN_IF_ERROR(check.Finish());
    if (!parser.keep_alive()) return absl::InternalError("the router closed the connection");
    return absl::OkStatus();
  }

  const ExpectedStream& expected_;
  int port_;
  bool quickack_;
  net::io_context ioc_;
  tcp::socket socket_;
  beast::flat_buffer buffer_;  // keeps bytes read past one response for the next
};

}  // namespace

std::string_view PathName(Path path) {
  switch (path) {
    case Path::kDirect:
      return "direct";
    case Path::kHttp:
      return "http";
    case Path::kGrpc:
      return "grpc";
  }
  return "?";
}

absl::StatusOr<std::unique_ptr<StreamClient>> MakeStreamClient(Path path, int port,
                                                               const ExpectedStream* expected,
                                                               const ClientOptions& options) {
  switch (path) {
    case Path::kDirect:
      return std::make_unique<DirectClient>(port, expected);
    case Path::kGrpc:
      return std::make_unique<GrpcClient>(port, expected);
    case Path::kHttp: {
      auto client = std::make_unique<HttpClient>(port, expected, options.http_quickack);
      BATON_RETURN_IF_ERROR(client->Connect());
      return client;
    }
  }
  return absl::InvalidArgumentError("unknown path");
}

}  // namespace baton::bench
