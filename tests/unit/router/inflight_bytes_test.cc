// --max-inflight-body-bytes bounds the request bytes the router holds at once over both
// APIs (issue 25 §3: the gRPC port bounded each message but not their sum): a baton.v1
// Generate holds its request's share for the call, as an HTTP request holds its body's
// until it has answered. A real RouterServer over a scripted worker that keeps the first
// stream open.
#include <sys/socket.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "baton/v1/baton.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "router/router_server.h"
#include "tests/fakes/fake_worker.h"
#include "tests/unit/service/http_test_client.h"

namespace baton::router {
namespace {

using ::testing::HasSubstr;

constexpr char kModel[] = BATON_SOURCE_DIR "/models/baton-tiny";

std::string Prompt() {
  std::string text;
  while (text.size() < 1000) text += "Once upon a time ";
  return text;
}

TEST(InflightBytesTest, GrpcAndHttpShareOneBound) {
  fakes::FakeWorkerServer worker;
  worker.worker.script = {5, 6};
  worker.worker.vocab_size = 1280;  // the bundled model's
  worker.worker.hang = true;        // the first stream stays open
  RouterOptions o;
  o.worker = worker.target();
  o.tokenizer = kModel;
  o.http_port = 0;
  o.grpc_port = 0;
  o.worker_wait = absl::Seconds(10);
  o.http.max_inflight_body_bytes = 1500;
  auto router = RouterServer::Start(o);
  ASSERT_TRUE(router.ok()) << router.status();
  auto stub = baton::v1::Baton::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string((*router)->grpc_port()), grpc::InsecureChannelCredentials()));

  baton::v1::GenerateRequest req;
  req.set_text(Prompt());
  req.mutable_stop()->set_max_tokens(2);
  grpc::ClientContext first_ctx;
  auto first = stub->Generate(&first_ctx, req);
  ASSERT_GE(fakes::FakeWorker::WaitFor(worker.worker.generates, 1), 1);

  // A second Generate of the same size does not fit beside it.
  {
    grpc::ClientContext ctx;
    auto second = stub->Generate(&ctx, req);
    baton::v1::GenerateResponse msg;
    while (second->Read(&msg)) {
    }
    const grpc::Status s = second->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr("--max-inflight-body-bytes"));
  }
  // Nor an HTTP body: the two APIs take from one budget.
  {
    const std::string body = "{\"model\":\"baton-tiny\",\"prompt\":\"" + Prompt() + "\"}";
    service::testing::TestClient http((*router)->http_port());
    ASSERT_TRUE(
        http.Send("POST /v1/completions HTTP/1.1\r\nHost: a\r\nContent-Type: "
                  "application/json\r\nContent-Length: " +
                  std::to_string(body.size()) + "\r\n\r\n" + body));
    auto r = http.ReadResponse();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->result_int(), 429);
    EXPECT_THAT(r->body(), HasSubstr("--max-inflight-body-bytes"));
  }
  // Once the first call ends, its share is back.
  first_ctx.TryCancel();
  baton::v1::GenerateResponse msg;
  while (first->Read(&msg)) {
  }
  (void)first->Finish();
  worker.worker.hang = false;
  // The router lets go of the call just after the client has its status.
  grpc::Status s;
  for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
       std::chrono::steady_clock::now() < end;) {
    grpc::ClientContext third_ctx;
    auto third = stub->Generate(&third_ctx, req);
    while (third->Read(&msg)) {
    }
    s = third->Finish();
    if (s.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(s.ok()) << s.error_message();
  (*router)->Shutdown(absl::ZeroDuration());
}

}  // namespace
}  // namespace baton::router
