// absl::Status <-> grpc::Status: the code and message, and the parameter an error names,
// which crosses as a google.rpc.BadRequest in the status details.
#include "service/grpc_status.h"

#include "common/param_error.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"

namespace baton::service {
namespace {

TEST(GrpcStatusTest, ThePlainStatusKeepsItsCodeAndMessageAndHasNoDetails) {
  const grpc::Status g = ToGrpcStatus(absl::ResourceExhaustedError("queue is full"));
  EXPECT_EQ(g.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(g.error_message(), "queue is full");
  EXPECT_TRUE(g.error_details().empty());
  const absl::Status back = FromGrpcStatus(g, "Generate at w1");
  EXPECT_EQ(back.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(back.message(), "Generate at w1: queue is full");
  EXPECT_EQ(ParamOf(back), "");
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok());
}

TEST(GrpcStatusTest, TheParameterCrossesAsABadRequest) {
  const absl::Status s = ParamError("top_p", "top_p must be in (0, 1], got 2");
  const grpc::Status g = ToGrpcStatus(s);
  EXPECT_EQ(g.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(g.error_message(), "top_p must be in (0, 1], got 2");

  // What any client's status-details helper sees.
  google::rpc::Status details;
  ASSERT_TRUE(details.ParseFromString(g.error_details()));
  EXPECT_EQ(details.code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  ASSERT_EQ(details.details_size(), 1);
  google::rpc::BadRequest bad;
  ASSERT_TRUE(details.details(0).UnpackTo(&bad));
  ASSERT_EQ(bad.field_violations_size(), 1);
  EXPECT_EQ(bad.field_violations(0).field(), "top_p");

  const absl::Status back = FromGrpcStatus(g);
  EXPECT_EQ(back.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(back.message(), s.message());
  EXPECT_EQ(ParamOf(back), "top_p");
}

TEST(GrpcStatusTest, DetailsThatAreNotAStatusAreIgnored) {
  const grpc::Status g(grpc::StatusCode::INVALID_ARGUMENT, "bad", "\xFF\xFF not a proto");
  const absl::Status back = FromGrpcStatus(g);
  EXPECT_EQ(back.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParamOf(back), "");
}

TEST(GrpcStatusTest, WithParamRenamesAndErases) {
  absl::Status s = ParamError("temperature", "too hot");
  EXPECT_EQ(ParamOf(WithParam(s, "sampling.temperature")), "sampling.temperature");
  EXPECT_EQ(ParamOf(WithParam(s, "")), "");
  EXPECT_TRUE(WithParam(absl::OkStatus(), "x").ok());
}

}  // namespace
}  // namespace baton::service
