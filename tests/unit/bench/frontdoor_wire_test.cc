#include "bench/frontdoor_wire.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace baton::bench {
namespace {

using std::chrono::microseconds;

// Three events: ids 7, 8, 9 that the router shows as " a", " b", " c".
ExpectedStream Three() { return {{7, 8, 9}, {" a", " b", " c"}}; }

Clock::time_point At(int us) { return Clock::time_point(microseconds(us)); }

baton::internal::v1::GenerateResponse Direct(int32_t id, bool last) {
  baton::internal::v1::GenerateResponse m;
  m.add_token_ids(id);
  if (last) {
    m.set_finished(true);
    m.set_finish_reason("length");
  }
  return m;
}

std::string Sse(std::string_view text, bool last) {
  return "data: {\"choices\":[{\"index\":0,\"text\":\"" + std::string(text) +
         "\",\"finish_reason\":" + (last ? "\"length\"" : "null") + "}]}\n\n";
}

TEST(StreamCheckTest, DirectInOrderRecordsEachReadTime) {
  const ExpectedStream e = Three();
  std::vector<Clock::time_point> got;
  StreamCheck c(e, "r", 3, &got);
  c.OnDirect(Direct(7, false), At(1));
  c.OnDirect(Direct(8, false), At(2));
  c.OnDirect(Direct(9, true), At(3));
  EXPECT_TRUE(c.Finish().ok()) << c.Finish();
  EXPECT_EQ(got, (std::vector<Clock::time_point>{At(1), At(2), At(3)}));
}

TEST(StreamCheckTest, DirectCatchesReorderLossAndAnEarlyOrMissingEnd) {
  const ExpectedStream e = Three();
  std::vector<Clock::time_point> got;
  {
    StreamCheck c(e, "r", 3, &got);
    c.OnDirect(Direct(8, false), At(1));
    EXPECT_FALSE(c.ok());
    c.OnDirect(Direct(7, false), At(2));  // after an error nothing more is checked
    EXPECT_NE(c.Finish().message().find("token id 8, expected 7"), std::string::npos) << c.Finish();
  }
  {
    StreamCheck c(e, "r", 3, &got);
    c.OnDirect(Direct(7, false), At(1));
    c.OnDirect(Direct(8, false), At(2));
    EXPECT_EQ(c.Finish().code(), absl::StatusCode::kDataLoss);  // one event short
  }
  {
    StreamCheck c(e, "r", 3, &got);
    c.OnDirect(Direct(7, true), At(1));
    EXPECT_NE(c.Finish().message().find("final too early"), std::string::npos) << c.Finish();
  }
  {
    StreamCheck c(e, "r", 3, &got);
    c.OnDirect(Direct(7, false), At(1));
    c.OnDirect(Direct(8, false), At(2));
    c.OnDirect(Direct(9, false), At(3));
    EXPECT_NE(c.Finish().message().find("not final"), std::string::npos) << c.Finish();
  }
  {
    StreamCheck c(e, "r", 3, &got);
    baton::internal::v1::GenerateResponse two = Direct(7, false);
    two.add_token_ids(8);
    c.OnDirect(two, At(1));
    EXPECT_FALSE(c.ok());
  }
}

TEST(StreamCheckTest, RouterGrpcMessageMayCarrySeveralTokens) {
  const ExpectedStream e = Three();
  std::vector<Clock::time_point> got;
  StreamCheck c(e, "r", 3, &got);
  baton::v1::GenerateResponse m;
  m.add_token_ids(7);
  m.add_token_ids(8);
  m.set_text(" a b");
  c.OnRouterGrpc(m, At(5));
  baton::v1::GenerateResponse last;
  last.add_token_ids(9);
  last.set_text(" c");
  last.set_finished(true);
  last.set_finish_reason("length");
  last.mutable_usage()->set_completion_tokens(3);
  c.OnRouterGrpc(last, At(6));
  EXPECT_TRUE(c.Finish().ok()) << c.Finish();
  EXPECT_EQ(got, (std::vector<Clock::time_point>{At(5), At(5), At(6)}));
}

TEST(StreamCheckTest, RouterGrpcCatchesWrongTextUsageAndTooManyTokens) {
  const ExpectedStream e = Three();
  std::vector<Clock::time_point> got;
  {
    StreamCheck c(e, "r", 3, &got);
    baton::v1::GenerateResponse m;
    m.add_token_ids(7);
    m.set_text(" x");
    c.OnRouterGrpc(m, At(1));
    EXPECT_NE(c.Finish().message().find("' x'"), std::string::npos) << c.Finish();
  }
  {
    StreamCheck c(e, "r", 3, &got);
    baton::v1::GenerateResponse m;
    for (int32_t id : {7, 8, 9}) m.add_token_ids(id);
    m.set_text(" a b c");
    m.set_finished(true);
    m.set_finish_reason("length");
    m.mutable_usage()->set_completion_tokens(2);
    c.OnRouterGrpc(m, At(1));
    EXPECT_NE(c.Finish().message().find("usage says 2"), std::string::npos) << c.Finish();
  }
  {
    StreamCheck c(e, "r", 2, &got);
    baton::v1::GenerateResponse m;
    for (int32_t id : {7, 8, 9}) m.add_token_ids(id);
    m.set_text(" a b c");
    c.OnRouterGrpc(m, At(1));
    EXPECT_FALSE(c.ok());
  }
}

TEST(StreamCheckTest, SseEventsSplitAnywhereAcrossReads) {
  const ExpectedStream e = Three();
  const std::string body =
      Sse(" a", false) + Sse(" b", false) + Sse(" c", true) + "data: [DONE]\n\n";
  for (size_t cut = 1; cut < body.size(); cut += 7) {
    std::vector<Clock::time_point> got;
    StreamCheck c(e, "r", 3, &got);
    c.OnSseBytes(std::string_view(body).substr(0, cut), At(1));
    c.OnSseBytes(std::string_view(body).substr(cut), At(2));
    ASSERT_TRUE(c.Finish().ok()) << "cut at " << cut << ": " << c.Finish();
    ASSERT_EQ(got.size(), 3u);
    // An event counts as read when its last byte was.
    size_t end = 0;
    for (size_t i = 0; i < 3; ++i) {
      end += Sse(e.texts[i], i == 2).size();
      EXPECT_EQ(got[i], cut >= end ? At(1) : At(2)) << "event " << i << ", cut at " << cut;
    }
  }
}

TEST(StreamCheckTest, SseCatchesMissingDoneDataAfterDoneAndGarbage) {
  const ExpectedStream e = Three();
  std::vector<Clock::time_point> got;
  const std::string events = Sse(" a", false) + Sse(" b", false) + Sse(" c", true);
  {
    StreamCheck c(e, "r", 3, &got);
    c.OnSseBytes(events, At(1));
    EXPECT_NE(c.Finish().message().find("no [DONE]"), std::string::npos) << c.Finish();
  }
  {
    StreamCheck c(e, "r", 3, &got);
    c.OnSseBytes(events + "data: [DONE]\n\n" + Sse(" a", false), At(1));
    EXPECT_NE(c.Finish().message().find("after [DONE]"), std::string::npos) << c.Finish();
  }
  for (const char* bad : {"event: x\n\n", "data: {\"choices\":[]}\n\n", "data: {\n\n",
                          "data: {\"choices\":[3]}\n\n"}) {
    StreamCheck c(e, "r", 3, &got);
    c.OnSseBytes(bad, At(1));
    EXPECT_EQ(c.Finish().code(), absl::StatusCode::kDataLoss) << bad;
  }
}

}  // namespace
}  // namespace baton::bench
