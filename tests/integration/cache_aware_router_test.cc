// The cache-aware router between real processes on loopback (issue 7): `baton-router` with
// its default policy in front of two `baton-prefill` and two `baton-decode` workers, its KV
// index fed by their KV event streams.
//   - Prompts sharing a prefix land where the prefix is cached: the hit rate is asserted
//     above what round-robin could reach on the same sequence.
//   - A killed prefill worker and a killed decode worker are routed around.
//   - Two routers side by side each build their index from the events: a prefix one
//     router placed is a hit through the other.
#include <signal.h>

#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "baton/v1/baton.grpc.pb.h"
#include "common/strings.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/router_proc.h"
#include "tests/integration/worker_proc.h"

namespace baton::worker {
namespace {

namespace pb = ::baton::v1;
using baton::testing::Answer;
using baton::testing::Generate;
using baton::testing::Router;
using baton::testing::WorkerProc;

constexpr int kPrefixTokens = 96;  // six blocks of 16

// Prefix p (kPrefixTokens ids) and a suffix of its own for round r.
pb::GenerateRequest Shared(int p, int r) {
  pb::GenerateRequest req;
  for (int k = 0; k < kPrefixTokens; ++k)
    req.mutable_token_ids()->add_ids(5 + (p * 389 + k * 17) % 1200);
  for (int k = 0; k < 8; ++k)
    req.mutable_token_ids()->add_ids(7 + (r * 131 + p * 7 + k * 29) % 1200);
  req.mutable_sampling()->set_temperature(0);
  req.mutable_stop()->set_max_tokens(2);
  return req;
}

double Metric(int port, const std::string& series) {
  return baton::testing::MetricValue(baton::testing::ScrapeMetrics(port), series);
}

// Waits until the router's index holds at least `blocks` blocks (events arrived).
bool IndexHolds(const Router& r, double blocks) {
  for (int i = 0; i < 100; ++i) {
    if (Metric(r.http_port, "baton_router_kv_index_blocks") >= blocks) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

struct Cluster {
  WorkerProc p0{{BATON_PREFILL_BIN}, "tcp"}, p1{{BATON_PREFILL_BIN}, "tcp"};
  WorkerProc d0{{BATON_DECODE_BIN}, "tcp"}, d1{{BATON_DECODE_BIN}, "tcp"};
  std::vector<std::string> Flags() const {
    return {"--prefill-worker", p0.target + "," + p1.target, "--decode-worker",
            d0.target + "," + d1.target};
  }
};

TEST(CacheAwareRouterTest, SharedPrefixesLandWhereTheyAreCachedAndDeadWorkersAreAvoided) {
  Cluster c;
  Router router(c.Flags());
  ASSERT_TRUE(router.stub);
  // Three prefixes, four rounds: round-robin over two prefill workers would compute each
  // prefix on both (6 hits of 12 at best); placing by the index computes each once.
  int64_t hits = 0;
  for (int r = 0; r < 4; ++r) {
    for (int p = 0; p < 3; ++p) {
      const Answer a = Generate(router, Shared(p, r));
      ASSERT_TRUE(a.status.ok()) << a.status.error_message();
      hits += a.cached_tokens;
    }
    if (r == 0) {
      EXPECT_TRUE(IndexHolds(router, 3 * 6)) << "the workers' events reached the index";
    }
  }
  EXPECT_GE(hits, 9 * kPrefixTokens) << "every repeat of a prefix was a hit";
  const double expected =
      Metric(router.http_port, "baton_router_expected_cached_prompt_tokens_total");
  EXPECT_GE(expected, 9 * kPrefixTokens) << "the policy expected those hits";
  EXPECT_NE(baton::testing::ScrapeMetrics(router.http_port)
                .find(R"(baton_router_routing_decisions_total{policy="baton")"),
            std::string::npos);

  // A dead prefill worker and a dead decode worker: once the health check notices, every
  // request goes to the live ones (no retries needed, no errors).
  c.p0.process->Signal(SIGKILL);
  c.d1.process->Signal(SIGKILL);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  EXPECT_EQ(Metric(router.http_port,
                   StrCat(R"(baton_router_worker_healthy{worker=")", c.p0.target, "\"}")),
            0);
  for (int p = 0; p < 3; ++p) {
    const Answer a = Generate(router, Shared(p, 9));
    ASSERT_TRUE(a.status.ok()) << a.status.error_message();
  }
}

TEST(CacheAwareRouterTest, AnUnreachableWorkerIsRetriedElsewhereAndAFullPoolAnswers429) {
  // The first worker computes prompts one token per step, so a long prompt stays in flight.
  WorkerProc slow{{BATON_DECODE_BIN}, "tcp", {"--max-prefill-chunk", "1"}};
  WorkerProc other{{BATON_DECODE_BIN}, "tcp"};
  WorkerProc third{{BATON_DECODE_BIN}, "tcp"};
  Router router({"--decode-worker", slow.target + "," + other.target + "," + third.target,
                 "--policy", "round_robin", "--max-inflight-per-worker", "1",
                 // No poll may notice the kills first: only a failed request does.
                 "--health-poll-seconds", "600"});
  ASSERT_TRUE(router.stub);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Generate(router, Shared(0, i)).status.ok());
  // Killed, and asked at once, before a health poll can notice: round-robin sends one of
  // the next requests there, and the router starts it over on the live worker.
  other.process->Signal(SIGKILL);
  for (int i = 0; i < 4; ++i) {
    const Answer a = Generate(router, Shared(1, i));
    ASSERT_TRUE(a.status.ok()) << a.status.error_message();
  }
  EXPECT_GE(Metric(router.http_port, "baton_router_reroutes_total"), 1);
  // The same through the HTTP front door.
  third.process->Signal(SIGKILL);
  for (int i = 0; i < 3; ++i) {
    const nlohmann::json got = baton::testing::Complete(
        router.http_port, {{"prompt", "Once upon a time"}, {"max_tokens", 3}, {"seed", i}});
    ASSERT_TRUE(got.contains("choices")) << got.dump();
  }
  EXPECT_GE(Metric(router.http_port, "baton_router_reroutes_total"), 2);
  // One request in flight on the only live worker, whose limit is 1: the next is refused
  // with RESOURCE_EXHAUSTED and a retry pushback, and the first still completes.
  pb::GenerateRequest long_prompt;
  for (int k = 0; k < 400; ++k) long_prompt.mutable_token_ids()->add_ids(3 + (k * 31) % 1200);
  long_prompt.mutable_stop()->set_max_tokens(4);
  baton::testing::AsyncGenerate busy(router, long_prompt);
  // Running, not only queued: a snapshot taken while it waits says running 0.
  ASSERT_GT(slow.WaitFor([](const auto& s) { return s.running() > 0; }, 20).running(), 0);
  grpc::ClientContext ctx;
  const Answer refused = Generate(router, Shared(2, 0), &ctx);
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << refused.status.error_message();
  EXPECT_NE(refused.status.error_message().find("--max-inflight-per-worker=1"), std::string::npos);
  const auto& trailers = ctx.GetServerTrailingMetadata();
  EXPECT_EQ(trailers.count("grpc-retry-pushback-ms"), 1u);
  busy.thread.join();
  EXPECT_TRUE(busy.answer.status.ok()) << busy.answer.status.error_message();
}

// Several choices (HTTP n > 1) start over on another worker too, while the client has
// seen nothing: always for a whole response, and for a stream before its first event.
TEST(CacheAwareRouterTest, RequestsWithSeveralChoicesAreRetriedElsewhere) {
  for (const bool stream : {false, true}) {
    SCOPED_TRACE(stream ? "stream" : "whole");
    WorkerProc live{{BATON_DECODE_BIN}, "tcp"};
    WorkerProc doomed{{BATON_DECODE_BIN}, "tcp"};
    Router router({"--decode-worker", live.target + "," + doomed.target, "--policy", "round_robin",
                   "--health-poll-seconds", "600"});
    ASSERT_TRUE(router.stub);
    for (int i = 0; i < 2; ++i) ASSERT_TRUE(Generate(router, Shared(0, i)).status.ok());
    doomed.process->Signal(SIGKILL);
    // Round-robin sends one of the next two to the dead worker.
    for (int i = 0; i < 2; ++i) {
      const nlohmann::json body = {{"prompt", "Once upon a time"},
                                   {"max_tokens", 3},
                                   {"n", 2},
                                   {"seed", i},
                                   {"stream", stream}};
      const std::string payload = body.dump();
      const std::string answer = baton::testing::HttpExchange(
          router.http_port,
          StrCat("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 "Connection: close\r\nContent-Length: ",
                 payload.size(), "\r\n\r\n", payload));
      EXPECT_EQ(answer.find("\"error\""), std::string::npos) << answer;
      EXPECT_NE(answer.find("\"index\":0"), std::string::npos) << answer;
      EXPECT_NE(answer.find("\"index\":1"), std::string::npos) << answer;
      if (stream) {
        EXPECT_NE(answer.find("data: [DONE]"), std::string::npos) << answer;
      }
    }
    EXPECT_EQ(Metric(router.http_port, "baton_router_reroutes_total"), 1);
    // The worker publishes its counters at the end of the step that finished a request,
    // which may come after the client saw the stream end.
    EXPECT_EQ(live.WaitFor([](const auto& s) { return s.requests_finished() >= 5; }, 2)
                  .requests_finished(),
              1 + 4)
        << "1 warm-up and 2 x 2 choices there";
  }
}

TEST(CacheAwareRouterTest, AWorkerWithAnotherBlockSizeIsRefused) {
  WorkerProc good{{BATON_DECODE_BIN}, "tcp"};
  WorkerProc odd{{BATON_DECODE_BIN}, "tcp", {"--block-size", "32"}};
  Router router({"--decode-worker", good.target + "," + odd.target, "--policy", "round_robin"});
  ASSERT_TRUE(router.stub);
  EXPECT_EQ(Metric(router.http_port,
                   StrCat(R"(baton_router_worker_healthy{worker=")", odd.target, "\"}")),
            0)
      << "its block hashes could never match the pool's";
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(Generate(router, Shared(0, i)).status.ok());
  EXPECT_EQ(odd.Stats().requests_finished(), 0);
  // Counters are published at the end of a step: maybe after the client saw the end.
  EXPECT_EQ(
      good.WaitFor([](const auto& s) { return s.requests_finished() >= 4; }, 2).requests_finished(),
      4);
}

TEST(CacheAwareRouterTest, WorkersComeFromADnsName) {
  WorkerProc worker{{BATON_DECODE_BIN}, "tcp"};
  const std::string port = worker.target.substr(worker.target.rfind(':') + 1);
  // localhost may also resolve to ::1, where nothing listens: that one stays unhealthy.
  Router router({"--decode-worker", "dns:localhost:" + port});
  ASSERT_TRUE(router.stub);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Generate(router, Shared(0, i)).status.ok());
  EXPECT_EQ(worker.WaitFor([](const auto& s) { return s.requests_finished() >= 3; }, 2)
                .requests_finished(),
            3);
}

TEST(CacheAwareRouterTest, TwoRoutersEachLearnFromTheEvents) {
  Cluster c;
  Router a(c.Flags());
  Router b(c.Flags());
  ASSERT_TRUE(a.stub && b.stub);
  ASSERT_TRUE(Generate(a, Shared(4, 0)).status.ok());
  ASSERT_TRUE(IndexHolds(b, 6)) << "router b heard the blocks router a's request stored";
  const Answer through_b = Generate(b, Shared(4, 1));
  ASSERT_TRUE(through_b.status.ok());
  EXPECT_EQ(through_b.cached_tokens, kPrefixTokens) << "b sent it where a had placed the prefix";
  ASSERT_TRUE(Generate(b, Shared(5, 0)).status.ok());
  ASSERT_TRUE(IndexHolds(a, 12));
  EXPECT_EQ(Generate(a, Shared(5, 1)).cached_tokens, kPrefixTokens);
}

// Short prompts skip the prefill worker (--max-local-prefill-tokens): the decode worker
// computes them; longer ones still take the split path.
TEST(CacheAwareRouterTest, ShortPromptsArePrefilledOnTheDecodeWorker) {
  Cluster c;
  Router router([&] {
    std::vector<std::string> flags = c.Flags();
    flags.insert(flags.end(), {"--max-local-prefill-tokens", "128"});
    return flags;
  }());
  ASSERT_TRUE(router.stub);
  const auto prefilled = [&c] {
    return c.p0.Stats().requests_finished() + c.p1.Stats().requests_finished();
  };
  for (int i = 0; i < 3; ++i) {
    const Answer a = Generate(router, Shared(30 + i, 0));  // 104 tokens
    ASSERT_TRUE(a.status.ok()) << a.status.error_message();
  }
  EXPECT_EQ(prefilled(), 0) << "no prompt of 104 tokens went to a prefill worker";
  pb::GenerateRequest long_prompt = Shared(33, 0);
  for (int k = 0; k < 100; ++k) long_prompt.mutable_token_ids()->add_ids(9 + k);
  const Answer a = Generate(router, long_prompt);  // 204 tokens
  ASSERT_TRUE(a.status.ok()) << a.status.error_message();
  EXPECT_EQ(prefilled(), 1) << "a longer one did";
}

// The --log-requests line of the next request (the router's stdout after its banner).
nlohmann::json NextLogLine(Router& r) {
  return nlohmann::json::parse(r.process->ReadLine(), nullptr, false);
}

TEST(CacheAwareRouterTest, ASessionKeyKeepsItsWorkerAndEveryRequestReportsItsBreakdown) {
  Cluster c;
  Router router([&] {
    std::vector<std::string> flags = c.Flags();
    flags.push_back("--log-requests");
    return flags;
  }());
  ASSERT_TRUE(router.stub);
  // Prompts that share nothing: only the key can keep them together.
  std::set<std::string> keyed_prefill, keyed_decode, free_prefill;
  for (int i = 0; i < 6; ++i) {
    pb::GenerateRequest req = Shared(20 + i, 0);
    req.set_prompt_cache_key("alice");
    const Answer a = Generate(router, req);
    ASSERT_TRUE(a.status.ok()) << a.status.error_message();
    const nlohmann::json line = NextLogLine(router);
    ASSERT_TRUE(line.is_object());
    keyed_prefill.insert(line.value("prefill_worker", ""));
    keyed_decode.insert(line.value("worker", ""));
    // The breakdown: the same figures in the response and in the log.
    EXPECT_EQ(line["api"], "grpc");
    EXPECT_EQ(line["status"], "OK");
    EXPECT_EQ(line["policy"], "baton");
    EXPECT_EQ(line["prompt_tokens"], kPrefixTokens + 8);
    EXPECT_EQ(line["cached_tokens"], a.cached_tokens);
    const pb::Timings& t = a.timings;
    EXPECT_GT(t.route_seconds(), 0);
    EXPECT_GT(t.prefill_seconds(), 0) << "a split request has a prefill leg";
    EXPECT_GT(t.prefill_compute_seconds(), 0);
    EXPECT_LE(t.prefill_compute_seconds() + t.prefill_queue_seconds(), t.prefill_seconds());
    // The decode stream opens with the Prefill call, so the first token may reach the
    // client before the Prefill's reply reaches the router; it never precedes the prefill
    // worker's own queue and compute.
    EXPECT_GE(t.time_to_first_token_seconds(),
              t.prefill_compute_seconds() + t.prefill_queue_seconds());
    EXPECT_LE(t.time_to_first_token_seconds(), t.total_seconds());
    EXPECT_DOUBLE_EQ(line["seconds"]["prefill"].get<double>(), t.prefill_seconds());
    EXPECT_DOUBLE_EQ(line["seconds"]["route"].get<double>(), t.route_seconds());
    EXPECT_GE(line["seconds"]["total"].get<double>(), t.total_seconds());
  }
  EXPECT_EQ(keyed_prefill.size(), 1U) << "one session, one prefill worker";
  EXPECT_EQ(keyed_decode.size(), 1U);
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(Generate(router, Shared(40 + i, 0)).status.ok());
    free_prefill.insert(NextLogLine(router).value("prefill_worker", ""));
  }
  EXPECT_EQ(free_prefill.size(), 2U) << "without a key, the load spreads";

  // HTTP: OpenAI's prompt_cache_key, and "timings" beside "usage".
  nlohmann::json body = {{"max_tokens", 2}, {"temperature", 0}};
  body["prompt"] = nlohmann::json::array();
  const pb::GenerateRequest prompt = Shared(60, 0);
  for (int id : prompt.token_ids().ids()) body["prompt"].push_back(id);
  body["prompt_cache_key"] = "alice";
  const nlohmann::json answer = baton::testing::Complete(router.http_port, body);
  ASSERT_TRUE(answer.contains("timings")) << answer.dump();
  const nlohmann::json line = NextLogLine(router);
  EXPECT_EQ(line["api"], "http");
  EXPECT_EQ(line["status"], "200");
  EXPECT_EQ(line["request_id"], answer["id"]);
  EXPECT_EQ(line.value("prefill_worker", ""), *keyed_prefill.begin()) << "the session held";
  const nlohmann::json& t = answer["timings"];
  EXPECT_GT(t["prefill_seconds"].get<double>(), 0);
  EXPECT_GT(t["route_seconds"].get<double>(), 0);
  EXPECT_LE(t["time_to_first_token_seconds"].get<double>(), t["total_seconds"].get<double>());
  EXPECT_DOUBLE_EQ(line["seconds"]["prefill"].get<double>(), t["prefill_seconds"].get<double>());
}

}  // namespace
}  // namespace baton::worker
