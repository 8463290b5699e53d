#include "service/health_service.h"

#include <chrono>
#include <memory>
#include <thread>

#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace baton::service {
namespace {

namespace hpb = ::grpc::health::v1;

class HealthServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::EnableDefaultHealthCheckService(false);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&health_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(port, 0);
    stub_ = hpb::Health::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                                     grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    health_.Shutdown();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  }

  grpc::Status Check(const std::string& service, hpb::HealthCheckResponse* out) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    hpb::HealthCheckRequest req;
    req.set_service(service);
    return stub_->Check(&ctx, req, out);
  }

  HealthService health_{{"", "baton.v1.Baton"}};
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<hpb::Health::Stub> stub_;
};

TEST_F(HealthServiceTest, CheckAnswersNamedServicesAndNotFoundForOthers) {
  hpb::HealthCheckResponse out;
  ASSERT_TRUE(Check("", &out).ok());
  EXPECT_EQ(out.status(), hpb::HealthCheckResponse::SERVING);
  ASSERT_TRUE(Check("baton.v1.Baton", &out).ok());
  EXPECT_EQ(out.status(), hpb::HealthCheckResponse::SERVING);
  grpc::Status s = Check("no.such.Service", &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(s.error_message().find("no.such.Service"), std::string::npos) << s.error_message();

  health_.Set("baton.v1.Baton", hpb::HealthCheckResponse::NOT_SERVING);
  ASSERT_TRUE(Check("baton.v1.Baton", &out).ok());
  EXPECT_EQ(out.status(), hpb::HealthCheckResponse::NOT_SERVING);
  health_.Set("added.Later", hpb::HealthCheckResponse::SERVING);
  ASSERT_TRUE(Check("added.Later", &out).ok());
  EXPECT_EQ(out.status(), hpb::HealthCheckResponse::SERVING);
}

TEST_F(HealthServiceTest, WatchSendsEachChangeAndEndsAtShutdown) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  hpb::HealthCheckRequest req;
  req.set_service("baton.v1.Baton");
  auto reader = stub_->Watch(&ctx, req);
  hpb::HealthCheckResponse out;
  ASSERT_TRUE(reader->Read(&out));
  EXPECT_EQ(out.status(), hpb::HealthCheckResponse::SERVING);
  health_.Set("baton.v1.Baton", hpb::HealthCheckResponse::NOT_SERVING);
  ASSERT_TRUE(reader->Read(&out));
  EXPECT_EQ(out.status(), hpb::HealthCheckResponse::NOT_SERVING);
  health_.Set("baton.v1.Baton", hpb::HealthCheckResponse::SERVING);
  ASSERT_TRUE(reader->Read(&out));
  EXPECT_EQ(out.status(), hpb::HealthCheckResponse::SERVING);
  health_.Shutdown();
  ASSERT_TRUE(reader->Read(&out));
  EXPECT_EQ(out.status(), hpb::HealthCheckResponse::NOT_SERVING);
  EXPECT_FALSE(reader->Read(&out));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(HealthServiceTest, WatchOfAnUnknownServiceSaysSoAndEndsWhenTheClientLeaves) {
  grpc::ClientContext ctx;
  hpb::HealthCheckRequest req;
  req.set_service("not.yet.Known");
  auto reader = stub_->Watch(&ctx, req);
  hpb::HealthCheckResponse out;
  ASSERT_TRUE(reader->Read(&out));
  EXPECT_EQ(out.status(), hpb::HealthCheckResponse::SERVICE_UNKNOWN);
  health_.Set("not.yet.Known", hpb::HealthCheckResponse::SERVING);
  ASSERT_TRUE(reader->Read(&out));
  EXPECT_EQ(out.status(), hpb::HealthCheckResponse::SERVING);
  ctx.TryCancel();
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  // The server's handler notices within its poll and frees its thread; TearDown's
  // Shutdown would otherwise wait the full grace.
  const auto t0 = std::chrono::steady_clock::now();
  health_.Shutdown();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
}

}  // namespace
}  // namespace baton::service
