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

// Tools, tool_choice and response_format map onto the same request the HTTP API parses.
TEST(GrpcRequestTest, ToolsAndResponseFormatMapOntoTheHttpRequest) {
  baton::v1::GenerateRequest r;
  baton::v1::ChatInput* chat = r.mutable_chat();
  baton::v1::ChatMessage* user = chat->add_messages();
  user->set_role("user");
  user->set_content("weather?");
  baton::v1::ChatMessage* assistant = chat->add_messages();
  assistant->set_role("assistant");
  baton::v1::ToolCall* call = assistant->add_tool_calls();
  call->set_id("call-1");
  call->set_name("get_weather");
  call->set_arguments(R"({"city": "Oslo"})");
  baton::v1::ChatMessage* tool = chat->add_messages();
  tool->set_role("tool");
  tool->set_tool_call_id("call-1");
  tool->set_content("sunny");
  baton::v1::Tool* t = chat->add_tools();
  t->set_name("get_weather");
  t->set_parameters_json(R"({"type": "object", "properties": {"city": {"type": "string"}}})");
  chat->set_tool_choice("get_weather");
  absl::StatusOr<frontdoor::OpenAiRequest> got =
      frontdoor::FromProto(r, frontdoor::ProtocolLimits());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->tool_choice, frontdoor::OpenAiRequest::ToolChoice::kNamed);
  EXPECT_EQ(got->tool_choice_name, "get_weather");
  EXPECT_EQ(got->constraint, frontdoor::OpenAiRequest::Constraint::kJsonSchema);
  EXPECT_EQ(got->chat["tools"][0]["function"]["parameters"]["properties"]["city"]["type"],
            "string");
  EXPECT_EQ(got->chat["messages"][1]["tool_calls"][0]["function"]["arguments"]["city"], "Oslo");
  EXPECT_EQ(got->chat["messages"][2]["tool_call_id"], "call-1");

  chat->set_tool_choice("nope");
  absl::StatusOr<frontdoor::OpenAiRequest> unknown =
      frontdoor::FromProto(r, frontdoor::ProtocolLimits());
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(std::string(unknown.status().message()), HasSubstr("not among the request's"));

  baton::v1::GenerateRequest json = Request();
  json.mutable_response_format()->set_json_schema(R"({"type": "string", "pattern": "a"})");
  absl::StatusOr<frontdoor::OpenAiRequest> refused =
      frontdoor::FromProto(json, frontdoor::ProtocolLimits());
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("pattern"));
  json.mutable_response_format()->set_json_object(true);
  absl::StatusOr<frontdoor::OpenAiRequest> object =
      frontdoor::FromProto(json, frontdoor::ProtocolLimits());
  ASSERT_TRUE(object.ok()) << object.status();
  EXPECT_EQ(object->constraint, frontdoor::OpenAiRequest::Constraint::kJsonObject);
}

}  // namespace
}  // namespace baton::router
