// Both front doors run a request through the same RequestRun: the failure paths of a
// split request, through a real RouterServer over fake prefill and decode workers
// (tests/fakes/fake_worker.h), each once for the OpenAI HTTP API and once for baton.v1
// gRPC. What the client sees differs only in the wire format: an HTTP status (or, once
// the stream has started, an error event) against a gRPC status.
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "baton/v1/baton.grpc.pb.h"
#include "boost/asio/connect.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/beast/core/flat_buffer.hpp"
#include "boost/beast/http/read.hpp"
#include "boost/beast/http/string_body.hpp"
#include "boost/beast/http/write.hpp"
#include "common/param_error.h"
#include "frontdoor/openai/openai_error.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "router/router_server.h"
#include "service/grpc_status.h"
#include "tests/fakes/fake_worker.h"
#include "tokenizer/loader.h"

namespace baton::router {
namespace {

namespace http = boost::beast::http;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kModel[] = BATON_SOURCE_DIR "/models/baton-tiny";

enum class Api { kHttp, kGrpc };

// What a client got: the text streamed, and how the call ended.
struct Answer {
  std::string text;
  bool ok = false;
  int http_status = 0;           // HTTP: the status line
  bool error_event = false;      // HTTP: an error came as an event after the text
  grpc::StatusCode grpc_code{};  // gRPC
  std::string error_message;     // both
  std::string param;             // HTTP: error.param; gRPC: the details' BadRequest field
};

class FrontDoorRunTest : public ::testing::TestWithParam<Api> {
 protected:
  void SetUp() override {
    auto files = tokenizer::LoadTokenizerFiles(kModel);
    ASSERT_TRUE(files.ok()) << files.status();
    tokenizer_ = files->tokenizer;
    script_ = tokenizer_->Encode(" there was a little girl", {.add_special_tokens = false}).value();
    for (auto* w : {&prefill_, &decode_}) {
      w->worker.script = script_;
      w->worker.model_id = "tiny";
      w->worker.vocab_size = tokenizer_->vocab_size();
    }
    RouterOptions o;
    o.worker = "";
    o.prefill_workers = prefill_.target();
    o.decode_workers = decode_.target();
    o.pool.failover = dispatch::PrefillFailover::kNone;  // a failed prefill is the client's answer
    o.tokenizer = kModel;
    o.http_port = 0;
    o.grpc_port = 0;
    o.worker_wait = absl::Seconds(10);
    auto router = RouterServer::Start(o);
    ASSERT_TRUE(router.ok()) << router.status();
    router_ = *std::move(router);
  }
  void TearDown() override {
    if (router_) router_->Shutdown(absl::ZeroDuration());
  }

  // One streamed request of 8 tokens; `cancel` (when set) runs on another thread once the
  // call is under way and must make it end from the client's side.
  Answer Call(const std::function<void()>& wait_then_cancel = nullptr) {
    return GetParam() == Api::kHttp ? CallHttp(wait_then_cancel) : CallGrpc(wait_then_cancel);
  }

  Answer CallGrpc(const std::function<void()>& wait_then_cancel) {
    auto stub = baton::v1::Baton::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(router_->grpc_port()), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    baton::v1::GenerateRequest req;
    req.set_text("Once upon a time");
    req.mutable_stop()->set_max_tokens(8);
    auto reader = stub->Generate(&ctx, req);
    std::thread canceller;
    if (wait_then_cancel) {
      canceller = std::thread([&] {
        wait_then_cancel();
        ctx.TryCancel();
      });
    }
    Answer a;
    baton::v1::GenerateResponse msg;
    while (reader->Read(&msg)) a.text += msg.text();
    const grpc::Status s = reader->Finish();
    if (canceller.joinable()) canceller.join();
    a.ok = s.ok();
    a.grpc_code = s.error_code();
    a.error_message = s.error_message();
    a.param = ParamOf(service::FromGrpcStatus(s));
    return a;
  }

  Answer CallHttp(const std::function<void()>& wait_then_cancel) {
    boost::asio::io_context ioc;
    boost::asio::ip::tcp::socket socket(ioc);
    socket.connect({boost::asio::ip::make_address_v4("127.0.0.1"),
                    static_cast<uint16_t>(router_->http_port())});
    http::request<http::string_body> post{http::verb::post, "/v1/completions", 11};
    post.set(http::field::host, "127.0.0.1");
    post.set(http::field::content_type, "application/json");
    post.body() = R"({"model":"tiny","prompt":"Once upon a time","max_tokens":8,"stream":true})";
    post.prepare_payload();
    http::write(socket, post);
    Answer a;
    if (wait_then_cancel) {  // the client hangs up
      wait_then_cancel();
      socket.close();
      a.error_message = "hung up";
      return a;
    }
    boost::beast::flat_buffer buffer;
    http::response<http::string_body> res;
    boost::system::error_code ec;
    http::read(socket, buffer, res, ec);
    a.http_status = static_cast<int>(res.result_int());
    if (a.http_status != 200) {
      const nlohmann::json error = nlohmann::json::parse(res.body())["error"];
      a.error_message = error["message"];
      if (error["param"].is_string()) a.param = error["param"];
      return a;
    }
    // Server-sent events: text chunks, maybe an error event, then [DONE].
    std::string body = res.body();
    size_t pos = 0;
    a.ok = true;
    while ((pos = body.find("data: ", pos)) != std::string::npos) {
      const size_t end = body.find("\n\n", pos);
      const std::string data = body.substr(pos + 6, end - pos - 6);
      pos = end;
      if (data == "[DONE]") continue;
      nlohmann::json j = nlohmann::json::parse(data);
      if (j.contains("error")) {
        a.ok = false;
        a.error_event = true;
        a.error_message = j["error"]["message"];
      } else if (!j["choices"].empty()) {
        a.text += j["choices"][0]["text"].get<std::string>();
      }
    }
    return a;
  }

  // The client saw a failure with `code` whose message has `message`.
  void ExpectFailure(const Answer& a, absl::StatusCode code, const std::string& message) {
    EXPECT_FALSE(a.ok);
    EXPECT_THAT(a.error_message, HasSubstr(message));
    if (GetParam() == Api::kGrpc) {
      EXPECT_EQ(static_cast<int>(a.grpc_code), static_cast<int>(code));
    } else if (!a.error_event) {
      EXPECT_EQ(a.http_status, frontdoor::ToApiError(absl::Status(code, "")).http_status);
    }
  }

  fakes::FakeWorkerServer prefill_, decode_;
  std::vector<int32_t> script_;
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer_;
  std::unique_ptr<RouterServer> router_;
};

TEST_P(FrontDoorRunTest, SplitRequestStreamsTheDecodeWorkersText) {
  Answer a = Call();
  ASSERT_TRUE(a.ok) << a.error_message;
  EXPECT_EQ(a.text, tokenizer_->Decode(script_).value());
  EXPECT_EQ(prefill_.worker.prefills.load(), 1);
  EXPECT_TRUE(decode_.kv.WaitForRelease(1).empty());
}

TEST_P(FrontDoorRunTest, RefusedPrefillIsTheClientsErrorAndReleasesTheReservation) {
  prefill_.worker.prefill_fail = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "too long");
  Answer a = Call();
  ExpectFailure(a, absl::StatusCode::kInvalidArgument, "too long");
  EXPECT_TRUE(a.text.empty());
  EXPECT_EQ(decode_.kv.WaitForRelease(10).size(), 1u);
}

TEST_P(FrontDoorRunTest, UnreachablePrefillWorkerFailsWithoutFailover) {
  prefill_.Shutdown();
  Answer a = Call();
  ExpectFailure(a, absl::StatusCode::kUnavailable, prefill_.target());
  EXPECT_TRUE(a.text.empty());
}

TEST_P(FrontDoorRunTest, DecodeFailureBeforeTheFirstTokenKeepsItsStatus) {
  decode_.worker.fail = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "queue is full");
  Answer a = Call();
  ExpectFailure(a, absl::StatusCode::kResourceExhausted, "queue is full");
  EXPECT_TRUE(a.text.empty());
  EXPECT_EQ(decode_.kv.WaitForRelease(10).size(), 1u);
}

TEST_P(FrontDoorRunTest, AParameterTheWorkerRefusesIsNamedInEachAPIsTerms) {
  decode_.worker.fail =
      service::ToGrpcStatus(ParamError("temperature", "temperature must be in [0, 100]"));
  Answer a = Call();
  ExpectFailure(a, absl::StatusCode::kInvalidArgument, "temperature must be in [0, 100]");
  EXPECT_EQ(a.param, GetParam() == Api::kHttp ? "temperature" : "sampling.temperature");
}

TEST_P(FrontDoorRunTest, DecodeFailureAfterTheFirstTokenEndsTheStreamAfterItsText) {
  decode_.worker.fail_after = 2;
  Answer a = Call();
  ExpectFailure(a, absl::StatusCode::kInternal, "mid-stream");
  EXPECT_EQ(a.text, tokenizer_->Decode(std::vector<int32_t>{script_[0], script_[1]}).value());
  if (GetParam() == Api::kHttp) {
    EXPECT_TRUE(a.error_event) << "the status line was sent";
  }
  EXPECT_TRUE(decode_.kv.WaitForRelease(1).empty()) << "the decode worker had claimed it";
}

TEST_P(FrontDoorRunTest, ClientCancelDuringThePrefillReleasesTheReservation) {
  prefill_.worker.prefill_hang = true;
  Answer a = Call([&] { ASSERT_EQ(fakes::FakeWorker::WaitFor(prefill_.worker.prefills, 1), 1); });
  EXPECT_FALSE(a.ok);
  EXPECT_EQ(decode_.kv.WaitForRelease(10).size(), 1u);
  EXPECT_TRUE(a.text.empty());
}

TEST_P(FrontDoorRunTest, ClientCancelDuringTheDecodeStreamStopsTheWorker) {
  decode_.worker.hang = true;
  Answer a = Call([&] { ASSERT_EQ(fakes::FakeWorker::WaitFor(decode_.worker.generates, 1), 1); });
  EXPECT_FALSE(a.ok);
  EXPECT_EQ(fakes::FakeWorker::WaitFor(decode_.worker.cancelled, 1), 1);
}

INSTANTIATE_TEST_SUITE_P(BothApis, FrontDoorRunTest, ::testing::Values(Api::kHttp, Api::kGrpc),
                         [](const auto& info) {
                           return info.param == Api::kHttp ? std::string("http")
                                                           : std::string("grpc");
                         });

}  // namespace
}  // namespace baton::router
