#include "bench/frontdoor_clients.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <exception>
#include <optional>
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
#include "nlohmann/json.hpp"

namespace baton::bench {
namespace {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
using net::ip::tcp;

constexpr size_t kReadBytes = 16 << 10;
constexpr size_t kMaxErrorBody = 4 << 10;

// What every event of every path is checked against.
// A path that carries no text (direct) or no ids passes nullopt.
absl::Status CheckEvent(const std::string& request_id, const ExpectedStream& e, int index,
                        int tokens, std::optional<int32_t> token_id,
                        std::optional<std::string_view> text, bool finished,
                        std::string_view finish_reason) {
  auto fail = [&](std::string_view what) {
    return absl::DataLossError(
        StrCat("request ", request_id, " event ", index, " of ", tokens, ": ", what));
  };
  if (index >= tokens) return fail("more events than max_tokens");
  if (token_id && *token_id != e.ids[index]) {
    return fail(StrCat("token id ", *token_id, ", expected ", e.ids[index]));
  }
  if (text && *text != e.texts[index]) {
    return fail(StrCat("text '", *text, "', expected '", e.texts[index], "'"));
  }
  const bool last = index == tokens - 1;
  if (finished != last) return fail(last ? "the last event is not final" : "final too early");
  if (last && finish_reason != "length") {
    return fail(StrCat("finish_reason '", finish_reason, "', expected 'length'"));
  }
  return absl::OkStatus();
}

std::shared_ptr<grpc::Channel> OwnChannel(int port) {
  grpc::ChannelArguments args;
  // Channels with equal arguments share one connection by default; separate users do not.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials(),
                                   args);
}

absl::Status FromGrpc(const grpc::Status& s, std::string_view what) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      StrCat(what, ": ", s.error_message()));
}

// baton.internal.v1.Worker/Generate on the stub: the path without a router.
class DirectClient final : public StreamClient {
 public:
  DirectClient(int port, const ExpectedStream* e)
      : expected_(*e), stub_(baton::internal::v1::Worker::NewStub(OwnChannel(port))) {}

  absl::Status Run(const std::string& request_id, int tokens,
                   std::vector<Clock::time_point>* received) override {
    baton::internal::v1::GenerateRequest req;
    req.set_request_id(request_id);
    req.add_prompt_ids(expected_.ids[0]);
    req.mutable_params()->set_max_tokens(tokens);
    grpc::ClientContext ctx;
    auto reader = stub_->Generate(&ctx, req);
    baton::internal::v1::GenerateResponse msg;
    int index = 0;
    absl::Status check;
    while (reader->Read(&msg)) {
      const Clock::time_point t = Clock::now();
      if (!check.ok()) continue;  // drained so that Finish does not block
      if (msg.token_ids_size() != 1) {
        check = absl::DataLossError(StrCat("request ", request_id, " event ", index, " has ",
                                           msg.token_ids_size(), " token ids"));
        continue;
      }
      check = CheckEvent(request_id, expected_, index, tokens, msg.token_ids(0), std::nullopt,
                         msg.finished(), msg.finish_reason());
      received->push_back(t);
      ++index;
    }
    BATON_RETURN_IF_ERROR(FromGrpc(reader->Finish(), StrCat("direct Generate ", request_id)));
    BATON_RETURN_IF_ERROR(check);
    if (index != tokens) {
      return absl::DataLossError(
          StrCat("request ", request_id, ": ", index, " events of ", tokens));
    }
    return absl::OkStatus();
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
    baton::v1::GenerateRequest req;
    req.set_request_id(request_id);
    req.set_text("hello");
    req.mutable_sampling()->set_temperature(0);
    req.mutable_stop()->set_max_tokens(tokens);
    grpc::ClientContext ctx;
    auto reader = stub_->Generate(&ctx, req);
    baton::v1::GenerateResponse msg;
    int index = 0;
    absl::Status check;
    while (reader->Read(&msg)) {
      const Clock::time_point t = Clock::now();
      if (!check.ok()) continue;
      // The router merges the deltas that pile up while a write is in flight, so one
      // message may carry several tokens; each counts as read when its message is.
      const int count = msg.token_ids_size();
      if (count < 1 || index + count > tokens) {
        check = absl::DataLossError(StrCat("request ", request_id, " message at token ", index,
                                           " has ", count, " token ids"));
        continue;
      }
      std::string want_text;
      for (int j = 0; j < count && check.ok(); ++j) {
        want_text += expected_.texts[index + j];
        const bool last_in_msg = j == count - 1;
        check = CheckEvent(request_id, expected_, index + j, tokens, msg.token_ids(j), std::nullopt,
                           last_in_msg && msg.finished(), msg.finish_reason());
      }
      if (check.ok() && msg.text() != want_text) {
        check =
            absl::DataLossError(StrCat("request ", request_id, " message at token ", index,
                                       ": text '", msg.text(), "', expected '", want_text, "'"));
      }
      if (check.ok() && msg.finished() && msg.usage().completion_tokens() != tokens) {
        check = absl::DataLossError(StrCat("request ", request_id, ": usage says ",
                                           msg.usage().completion_tokens(), " tokens"));
      }
      received->insert(received->end(), count, t);
      index += count;
    }
    BATON_RETURN_IF_ERROR(FromGrpc(reader->Finish(), StrCat("router Generate ", request_id)));
    BATON_RETURN_IF_ERROR(check);
    if (index != tokens) {
      return absl::DataLossError(
          StrCat("request ", request_id, ": ", index, " events of ", tokens));
    }
    return absl::OkStatus();
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

  absl::Status Connect() {
    beast::error_code ec;
    socket_.connect(tcp::endpoint(net::ip::make_address_v4("127.0.0.1"), port_), ec);
    if (ec) return absl::UnavailableError(StrCat("connect to the router: ", ec.message()));
    // Requests are single writes; this only keeps the client from adding delay of its own.
    socket_.set_option(tcp::no_delay(true), ec);
    return absl::OkStatus();
  }

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
    http::request<http::string_body> req{http::verb::post, "/v1/completions", 11};
    req.set(http::field::host, StrCat("127.0.0.1:", port_));
    req.set(http::field::content_type, "application/json");
    req.set(http::field::accept, "text/event-stream");
    req.keep_alive(true);
    req.body() = StrCat(R"({"model":"stub","prompt":"hello","temperature":0,"stream":true,)",
                        R"("max_tokens":)", tokens, R"(,"request_id":")", request_id, R"("})");
    req.prepare_payload();
    beast::error_code ec;
    http::write(socket_, req, ec);
    if (ec) return absl::UnavailableError(StrCat("send ", request_id, ": ", ec.message()));

    http::response_parser<http::buffer_body> parser;
    parser.body_limit(boost::none);
    http::read_header(socket_, buffer_, parser, ec);
    if (ec) return absl::UnavailableError(StrCat("response to ", request_id, ": ", ec.message()));
    const unsigned status = parser.get().result_int();

    char chunk[kReadBytes];
    std::string pending;  // bytes of an event not yet complete
    std::string error_body;
    int index = 0;
    bool done = false;
    absl::Status check;
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
        error_body.append(chunk, std::min(n, kMaxErrorBody));
        continue;
      }
      if (!check.ok()) continue;
      pending.append(chunk, n);
      // The router writes each event as "data: <json>\n\n".
      for (size_t end = pending.find("\n\n"); end != std::string::npos && check.ok();
           end = pending.find("\n\n")) {
        const std::string event = pending.substr(0, end);
        pending.erase(0, end + 2);
        check = OnEvent(request_id, tokens, event, t, &index, &done, received);
      }
    }
    if (ec) return absl::UnavailableError(StrCat("stream of ", request_id, ": ", ec.message()));
    if (status != 200) {
      return absl::InternalError(
          StrCat("request ", request_id, ": HTTP ", status, ": ", error_body));
    }
    BATON_RETURN_IF_ERROR(check);
    if (!done) return absl::DataLossError(StrCat("request ", request_id, ": no [DONE]"));
    if (index != tokens) {
      return absl::DataLossError(
          StrCat("request ", request_id, ": ", index, " events of ", tokens));
    }
    if (!parser.keep_alive()) return absl::InternalError("the router closed the connection");
    return absl::OkStatus();
  }

  absl::Status OnEvent(const std::string& request_id, int tokens, std::string_view event,
                       Clock::time_point t, int* index, bool* done,
                       std::vector<Clock::time_point>* received) {
    constexpr std::string_view kData = "data: ";
    if (!event.starts_with(kData)) {
      return absl::DataLossError(StrCat("request ", request_id, ": event '", event, "'"));
    }
    const std::string_view data = event.substr(kData.size());
    if (*done) return absl::DataLossError(StrCat("request ", request_id, ": data after [DONE]"));
    if (data == "[DONE]") {
      *done = true;
      return absl::OkStatus();
    }
    const nlohmann::json j = nlohmann::json::parse(data, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.contains("choices") || j["choices"].empty()) {
      return absl::DataLossError(StrCat("request ", request_id, ": event data '", data, "'"));
    }
    const nlohmann::json& c = j["choices"][0];
    const std::string text = c.value("text", "");
    const bool finished = c.contains("finish_reason") && c["finish_reason"].is_string();
    const std::string reason = finished ? c["finish_reason"].get<std::string>() : "";
    BATON_RETURN_IF_ERROR(CheckEvent(request_id, expected_, *index, tokens, std::nullopt,
                                     std::string_view(text), finished, reason));
    received->push_back(t);
    ++*index;
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
