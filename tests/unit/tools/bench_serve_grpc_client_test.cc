#include "tools/bench_serve_grpc_client.h"

#include <chrono>
#include <set>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/tools/fake_baton_grpc_server.h"
#include "tools/bench_serve_load.h"
#include "tools/bench_serve_stats.h"

namespace baton::tools {
namespace {

using ::testing::AllOf;
using ::testing::Each;
using ::testing::ElementsAre;
using testing::FakeBatonServer;
using ::testing::Ge;
using ::testing::HasSubstr;
using ::testing::Lt;

BenchPrompt Prompt() {
  return BenchPrompt{.text = "hello", .token_ids = {5, 6, 7, 8}, .prompt_len = 4, .output_len = 12};
}

GrpcClientOptions Options(const std::string& target) {
  GrpcClientOptions o;
  o.target = target;
  o.request.timeout_s = 10;
  return o;
}

TEST(BuildGenerateRequestTest, SendsIdsAndLengthControls) {
  RequestOptions o;
  o.model = "m";
  o.temperature = 0.5;
  baton::v1::GenerateRequest req = BuildGenerateRequest(o, Prompt());
  EXPECT_EQ(req.model(), "m");
  ASSERT_TRUE(req.has_token_ids());
  EXPECT_THAT(req.token_ids().ids(), ElementsAre(5, 6, 7, 8));
  EXPECT_EQ(req.stop().max_tokens(), 12);
  EXPECT_TRUE(req.stop().ignore_eos());
  EXPECT_EQ(req.sampling().temperature(), 0.5);

  o.send_token_ids = false;
  o.ignore_eos = false;
  req = BuildGenerateRequest(o, Prompt());
  EXPECT_EQ(req.text(), "hello");
  EXPECT_FALSE(req.stop().ignore_eos());
  // A prompt without ids goes as text whatever the option says.
  o.send_token_ids = true;
  BenchPrompt words = Prompt();
  words.token_ids.clear();
  EXPECT_EQ(BuildGenerateRequest(o, words).text(), "hello");
}

TEST(GrpcBenchClientTest, TimesAGenerateStream) {
  FakeBatonServer server({.deltas = 5,
                          .ids_per_delta = 2,
                          .first_delay = std::chrono::milliseconds(50),
                          .delta_delay = std::chrono::milliseconds(30)});
  GrpcClientOptions o = Options(server.target());
  o.request.api_key = "sk-grpc";
  GrpcBenchClient client(o);
  const RequestResult r = client.Send(Prompt());
  ASSERT_TRUE(r.success) << r.error;
  EXPECT_EQ(r.output_tokens, 10);
  EXPECT_EQ(r.prompt_tokens, 4);
  EXPECT_EQ(r.cached_tokens, 2);
  ASSERT_EQ(r.itl_s.size(), 4u);
  // Sleeps guarantee only that nothing is read before it was sent: see the HTTP test.
  double sum = 0;
  for (double itl : r.itl_s) sum += itl;
  EXPECT_GE(r.ttft_s, 0.050);
  EXPECT_GE(r.ttft_s + sum, 0.050 + 4 * 0.030 - 1e-4);
  EXPECT_GE(sum, 4 * 0.030 / 2);
  EXPECT_THAT(r.itl_s, Each(AllOf(Ge(0.0), Lt(2.0))));
  EXPECT_GE(r.e2el_s, r.ttft_s + sum);
  EXPECT_THAT(server.authorizations(), ElementsAre("Bearer sk-grpc"));
  ASSERT_EQ(server.requests().size(), 1u);
  EXPECT_THAT(server.requests()[0].token_ids().ids(), ElementsAre(5, 6, 7, 8));
  EXPECT_EQ(server.requests()[0].stop().max_tokens(), 12);
}

TEST(GrpcBenchClientTest, UsageWinsAndIdsCountWithoutIt) {
  {
    FakeBatonServer server({.deltas = 3, .completion_tokens = 9});
    GrpcBenchClient client(Options(server.target()));
    const RequestResult r = client.Send(Prompt());
    ASSERT_TRUE(r.success) << r.error;
    EXPECT_EQ(r.output_tokens, 9);
  }
  {
    FakeBatonServer server({.deltas = 3, .ids_per_delta = 3, .usage = false});
    GrpcBenchClient client(Options(server.target()));
    const RequestResult r = client.Send(Prompt());
    ASSERT_TRUE(r.success) << r.error;
    EXPECT_EQ(r.output_tokens, 9);
    EXPECT_EQ(r.prompt_tokens, -1);
  }
}

TEST(GrpcBenchClientTest, StatusErrorFails) {
  FakeBatonServer server(
      {.code = grpc::StatusCode::RESOURCE_EXHAUSTED, .message = "queue is full (4096)"});
  GrpcBenchClient client(Options(server.target()));
  const RequestResult r = client.Send(Prompt());
  EXPECT_FALSE(r.success);
  EXPECT_EQ(r.error, "gRPC RESOURCE_EXHAUSTED: queue is full (4096)");
}

TEST(GrpcBenchClientTest, StreamWithoutFinishFails) {
  FakeBatonServer server({.deltas = 2, .finish = false});
  GrpcBenchClient client(Options(server.target()));
  const RequestResult r = client.Send(Prompt());
  EXPECT_FALSE(r.success);
  EXPECT_THAT(r.error, HasSubstr("finished"));
}

TEST(GrpcBenchClientTest, DeadlineFails) {
  FakeBatonServer server({.deltas = 1, .first_delay = std::chrono::milliseconds(1500)});
  GrpcClientOptions o = Options(server.target());
  o.request.timeout_s = 0.2;
  GrpcBenchClient client(o);
  const RequestResult r = client.Send(Prompt());
  EXPECT_FALSE(r.success);
  EXPECT_THAT(r.error, HasSubstr("DEADLINE_EXCEEDED"));
}

TEST(GrpcBenchClientTest, UnreachableServerFails) {
  GrpcClientOptions o = Options("127.0.0.1:1");
  o.request.timeout_s = 2;
  GrpcBenchClient client(o);
  const RequestResult r = client.Send(Prompt());
  EXPECT_FALSE(r.success);
  EXPECT_THAT(r.error, HasSubstr("UNAVAILABLE"));
}

TEST(GrpcBenchClientTest, MaxConcurrencyIsNeverExceeded) {
  FakeBatonServer server({.deltas = 4,
                          .first_delay = std::chrono::milliseconds(30),
                          .delta_delay = std::chrono::milliseconds(10)});
  GrpcClientOptions o = Options(server.target());
  o.channels = 2;
  GrpcBenchClient client(o);
  std::vector<BenchPrompt> prompts(15, Prompt());
  LoadOptions load;
  load.max_concurrency = 4;
  // Every request ends on the client's one loop thread, not on a thread of its own.
  std::set<std::thread::id> threads;
  load.on_done = [&](int64_t, int64_t, double) { threads.insert(std::this_thread::get_id()); };
  auto run = RunLoad(client, prompts, load);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(threads.size(), 1u);
  EXPECT_FALSE(threads.contains(std::this_thread::get_id()));
  for (const RequestResult& r : run->results) EXPECT_TRUE(r.success) << r.error;
  EXPECT_EQ(server.calls(), 15);
  EXPECT_EQ(server.max_active(), 4);
  EXPECT_LE(PeakConcurrency(run->results), 4);
}

}  // namespace
}  // namespace baton::tools
