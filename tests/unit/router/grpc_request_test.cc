// The baton.v1 GenerateRequest checks (FromProto): every client string has a bound, and the
// error names the field.
#include <cstdint>
#include <limits>
#include <string>

#include "frontdoor/grpc/grpc_api.h"
#include "frontdoor/openai/request_builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::router {
namespace {

using ::testing::HasSubstr;

baton::v1::GenerateRequest Request() {
  baton::v1::GenerateRequest r;
  r.set_text("Once upon a time");
  return r;
}

TEST(GrpcRequestTest, PromptCacheKeyIsCarried) {
  baton::v1::GenerateRequest r = Request();
  r.set_prompt_cache_key("conv-7");
  absl::StatusOr<frontdoor::OpenAiRequest> got =
      frontdoor::FromProto(r, frontdoor::ProtocolLimits());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->prompt_cache_key, "conv-7");
}

TEST(GrpcRequestTest, IdentifiersAreBounded) {
  const frontdoor::ProtocolLimits limits;
  const std::string long_id(limits.max_id_bytes + 1, 'x');
  for (const char* field : {"request_id", "cache_salt", "prompt_cache_key"}) {
    baton::v1::GenerateRequest r = Request();
    r.GetReflection()->SetString(&r, r.GetDescriptor()->FindFieldByName(field), long_id);
    absl::StatusOr<frontdoor::OpenAiRequest> got = frontdoor::FromProto(r, limits);
    ASSERT_FALSE(got.ok()) << field;
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(got.status().message()),
                HasSubstr(std::string(field) + " is 257 bytes; the maximum is 256"));
  }
}

TEST(GrpcRequestTest, RequestIdMustNotCarryControlCharacters) {
  baton::v1::GenerateRequest r = Request();
  r.set_request_id("a\r\nb");
  absl::StatusOr<frontdoor::OpenAiRequest> got =
      frontdoor::FromProto(r, frontdoor::ProtocolLimits());
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("request_id must not contain"));
}

// As over HTTP, top_k below -1 is refused (it was once passed on as "off"), down to
// INT64_MIN.
TEST(GrpcRequestTest, TopKBelowMinusOneIsRefused) {
  for (int64_t top_k : {int64_t{-2}, std::numeric_limits<int64_t>::min()}) {
    baton::v1::GenerateRequest r = Request();
    r.mutable_sampling()->set_top_k(top_k);
    absl::StatusOr<frontdoor::OpenAiRequest> got =
        frontdoor::FromProto(r, frontdoor::ProtocolLimits());
    ASSERT_FALSE(got.ok()) << top_k;
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(got.status().message()), HasSubstr("sampling.top_k is "));
  }
  for (int64_t top_k : {-1, 0, 1}) {
    baton::v1::GenerateRequest r = Request();
    r.mutable_sampling()->set_top_k(top_k);
    EXPECT_TRUE(frontdoor::FromProto(r, frontdoor::ProtocolLimits()).ok()) << top_k;
  }
}

// Chat roles are OpenAI's set over gRPC too, and the error says which message.
TEST(GrpcRequestTest, UnknownChatRolesAreRefused) {
  baton::v1::GenerateRequest r;
  baton::v1::ChatMessage* m = r.mutable_chat()->add_messages();
  m->set_role("user");
  m->set_content("hi");
  m = r.mutable_chat()->add_messages();
  m->set_role("narrator");
  absl::StatusOr<frontdoor::OpenAiRequest> got =
      frontdoor::FromProto(r, frontdoor::ProtocolLimits());
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(got.status().message()),
              HasSubstr("Invalid value for 'chat.messages[1].role': 'narrator'"));
  m->set_role("developer");
  EXPECT_TRUE(frontdoor::FromProto(r, frontdoor::ProtocolLimits()).ok());
}

// A too-large max_tokens names the gRPC field in the message.
TEST(GrpcRequestTest, MaxTokensKeepsItsFieldName) {
  baton::v1::GenerateRequest r = Request();
  r.mutable_stop()->set_max_tokens(1000);
  absl::StatusOr<frontdoor::OpenAiRequest> got =
      frontdoor::FromProto(r, frontdoor::ProtocolLimits());
  ASSERT_TRUE(got.ok()) << got.status();
  absl::StatusOr<int64_t> fit = frontdoor::FitToContext(512, 10, *got);
  EXPECT_THAT(std::string(fit.status().message()), HasSubstr("('stop.max_tokens')"));
}

}  // namespace
}  // namespace baton::router
