// Invalid UTF-8 in a string field of baton.v1 Generate, Tokenize or Detokenize is the client's
// error, named by its field: INVALID_ARGUMENT, as HTTP answers 400, not gRPC's INTERNAL "Unable to
// parse request" (which every string field got before). A real RouterServer over a scripted worker;
// the C++ client's serializer only logs when it sends such a string, so the bytes reach the router
// as a hostile client's would. FirstNonUtf8Field is checked on its own too.
#include <memory>
#include <string>

#include "baton/v1/baton.grpc.pb.h"
#include "frontdoor/grpc/wire_message.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "router/router_server.h"
#include "tests/fakes/fake_worker.h"

namespace baton::router {
namespace {

using ::testing::HasSubstr;

constexpr char kModel[] = BATON_SOURCE_DIR "/models/baton-tiny";
constexpr char kBad[] = "ab\xFF\xFE";

class GrpcUtf8Test : public ::testing::Test {
 protected:
  void SetUp() override {
    worker_.worker.script = {5, 6};
    worker_.worker.vocab_size = 1280;  // the bundled model's
    RouterOptions o;
    o.worker = worker_.target();
    o.tokenizer = kModel;
    o.http_port = 0;
    o.grpc_port = 0;
    o.worker_wait = absl::Seconds(10);
    auto router = RouterServer::Start(o);
    ASSERT_TRUE(router.ok()) << router.status();
    router_ = *std::move(router);
    stub_ = baton::v1::Baton::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(router_->grpc_port()), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (router_) router_->Shutdown(absl::ZeroDuration());
  }

  grpc::Status Generate(const baton::v1::GenerateRequest& req, std::string* text = nullptr) {
    grpc::ClientContext ctx;
    auto reader = stub_->Generate(&ctx, req);
    baton::v1::GenerateResponse msg;
    while (reader->Read(&msg)) {
      if (text != nullptr) *text += msg.text();
    }
    return reader->Finish();
  }

  void ExpectRefused(const grpc::Status& s, const std::string& field) {
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << field << ": " << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr("'" + field + "' is not valid UTF-8"));
  }

  fakes::FakeWorkerServer worker_;
  std::unique_ptr<RouterServer> router_;
  std::unique_ptr<baton::v1::Baton::Stub> stub_;
};

TEST_F(GrpcUtf8Test, GenerateRefusesEveryInvalidStringNamingIt) {
  {
    baton::v1::GenerateRequest r;
    r.set_text(kBad);
    ExpectRefused(Generate(r), "text");
  }
  {
    baton::v1::GenerateRequest r;
    r.mutable_chat()->add_messages()->set_role("user");
    auto* m = r.mutable_chat()->add_messages();
    m->set_role("user");
    m->set_content(kBad);
    ExpectRefused(Generate(r), "chat.messages[1].content");
  }
  {
    baton::v1::GenerateRequest r;
    r.set_text("hi");
    r.mutable_stop()->add_stop("ok");
    r.mutable_stop()->add_stop(kBad);
    ExpectRefused(Generate(r), "stop.stop[1]");
  }
  for (const char* field : {"model", "request_id", "cache_salt", "prompt_cache_key"}) {
    baton::v1::GenerateRequest r;
    r.set_text("hi");
    r.GetReflection()->SetString(&r, r.GetDescriptor()->FindFieldByName(field), kBad);
    ExpectRefused(Generate(r), field);
  }
  EXPECT_EQ(worker_.worker.generates.load(), 0);
}

TEST_F(GrpcUtf8Test, TokenizeAndDetokenizeRefuseInvalidStringsNamingThem) {
  {
    baton::v1::TokenizeRequest t;
    t.set_text(kBad);
    baton::v1::TokenizeResponse out;
    grpc::ClientContext ctx;
    ExpectRefused(stub_->Tokenize(&ctx, t, &out), "text");
  }
  {
    baton::v1::TokenizeRequest t;
    auto* m = t.mutable_chat()->add_messages();
    m->set_role("user");
    m->set_content(kBad);
    baton::v1::TokenizeResponse out;
    grpc::ClientContext ctx;
    ExpectRefused(stub_->Tokenize(&ctx, t, &out), "chat.messages[0].content");
  }
  {
    baton::v1::DetokenizeRequest d;
    d.set_model(kBad);
    d.add_token_ids(5);
    baton::v1::DetokenizeResponse out;
    grpc::ClientContext ctx;
    ExpectRefused(stub_->Detokenize(&ctx, d, &out), "model");
  }
  // The router still answers afterwards, on the same loops.
  baton::v1::TokenizeRequest t;
  t.set_text("fine");
  baton::v1::TokenizeResponse out;
  grpc::ClientContext ctx;
  EXPECT_TRUE(stub_->Tokenize(&ctx, t, &out).ok());
  EXPECT_GT(out.count(), 0);
}

TEST_F(GrpcUtf8Test, TokenizeAnswersTextWhoseTokensSplitACharacter) {
  baton::v1::TokenizeRequest t;
  baton::v1::TokenizeResponse tr;
  grpc::ClientContext c3;
  t.set_text("caf\xC3\xA9");
  // "é" is two byte-level tokens here: each one's text still travels (it once made the
  // response itself unparseable).
  const grpc::Status tokenized = stub_->Tokenize(&c3, t, &tr);
  ASSERT_TRUE(tokenized.ok()) << tokenized.error_message();
  EXPECT_GT(tr.count(), 0);
  EXPECT_EQ(tr.tokens_size(), tr.token_ids_size());
  grpc::ClientContext c4;
  baton::v1::DetokenizeRequest d;
  d.mutable_token_ids()->CopyFrom(tr.token_ids());
  baton::v1::DetokenizeResponse dr;
  ASSERT_TRUE(stub_->Detokenize(&c4, d, &dr).ok());
  EXPECT_EQ(dr.text(), "caf\xC3\xA9");
  grpc::ClientContext c5;
  baton::v1::ModelCard card;
  ASSERT_TRUE(stub_->ModelInfo(&c5, {}, &card).ok());
  EXPECT_EQ(card.vocab_size(), 1280);
}

TEST_F(GrpcUtf8Test, ValidTextStillGenerates) {
  baton::v1::GenerateRequest r;
  r.set_text("caf\xC3\xA9");
  std::string text;
  EXPECT_TRUE(Generate(r, &text).ok());
  EXPECT_FALSE(text.empty());
}

TEST(FirstNonUtf8FieldTest, FindsNestedAndRepeatedFieldsAndNothingInValidOnes) {
  baton::v1::GenerateRequest r;
  r.set_text("fine");
  auto* m = r.mutable_chat()->add_messages();
  m->set_role("user");
  m->set_content("fine too");
  std::string wire;
  ASSERT_TRUE(r.SerializeToString(&wire));
  EXPECT_EQ(frontdoor::FirstNonUtf8Field(wire, *r.GetDescriptor()), "");
  r.mutable_chat()->add_messages()->set_role(kBad);
  ASSERT_TRUE(r.SerializePartialToString(&wire));
  EXPECT_EQ(frontdoor::FirstNonUtf8Field(wire, *r.GetDescriptor()), "chat.messages[1].role");
  EXPECT_EQ(frontdoor::FirstNonUtf8Field("\xFF\xFF\xFF", *r.GetDescriptor()), "");
}

}  // namespace
}  // namespace baton::router
