// Mid-stream migration (issue 25 §5): when the worker streaming a request dies, or stops
// answering, after tokens have reached the client, the router continues the stream on
// another worker from the tokens generated so far (--migration-limit, default 1). The
// client sees one stream, without a gap or a repeated token, and with greedy or seeded
// sampling the whole answer equals an uninterrupted run's: the oracle here is that run,
// on the same cluster, before the fault.
#include <signal.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/integration/router_proc.h"
#include "tests/integration/worker_proc.h"

namespace baton::testing {
namespace {

namespace ipb = ::baton::internal::v1;

struct Case {
  const char* name;
  bool split;    // a prefill worker and two decode workers, else two colocated workers
  int signal;    // SIGKILL, or SIGSTOP (noticed by keepalive)
  bool sampled;  // temperature 0.9 with a seed and a repetition penalty, else greedy
};

class MigrationTest : public ::testing::TestWithParam<Case> {};

TEST_P(MigrationTest, TheStreamContinuesOnAnotherWorkerAsIfNothingHappened) {
  const Case c = GetParam();
  // Slow steps keep the stream open long enough to strike in the middle of it.
  const std::vector<std::string> slow = {"--debug-step-delay-ms", "30"};
  std::unique_ptr<WorkerProc> prefill;
  std::vector<std::unique_ptr<WorkerProc>> servers;
  if (c.split) {
    prefill = std::make_unique<WorkerProc>(std::vector<std::string>{BATON_PREFILL_BIN}, "tcp");
    for (int i = 0; i < 2; ++i) {
      servers.push_back(
          std::make_unique<WorkerProc>(std::vector<std::string>{BATON_DECODE_BIN}, "tcp", slow));
    }
  } else {
    for (int i = 0; i < 2; ++i) {
      servers.push_back(
          std::make_unique<WorkerProc>(std::vector<std::string>{BATON_BIN, "worker"}, "tcp", slow));
    }
  }
  for (const auto& w : servers) ASSERT_FALSE(w->target.empty());
  const std::string both = servers[0]->target + "," + servers[1]->target;
  std::vector<std::string> flags =
      c.split
          ? std::vector<std::string>{"--prefill-worker", prefill->target, "--decode-worker", both}
          : std::vector<std::string>{"--worker", both};
  Router router(flags);
  ASSERT_NE(router.stub, nullptr);

  pb::GenerateRequest req;
  req.set_text("Once upon a time");
  req.mutable_stop()->set_max_tokens(60);
  req.mutable_stop()->set_ignore_eos(true);
  if (c.sampled) {
    req.mutable_sampling()->set_temperature(0.9);
    req.mutable_sampling()->set_seed(1234);
    req.mutable_sampling()->set_repetition_penalty(1.3);
  } else {
    req.mutable_sampling()->set_temperature(0);
  }
  const Answer reference = Generate(router, req);
  ASSERT_TRUE(reference.status.ok()) << reference.status.error_message();
  ASSERT_EQ(reference.ids.size(), 60u);

  AsyncGenerate call(router, req);
  auto running = [](const ipb::GetStatsResponse& s) { return s.running() > 0; };
  int serving = -1;
  for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
       serving < 0 && std::chrono::steady_clock::now() < end;) {
    for (int i = 0; i < 2 && serving < 0; ++i) {
      if (running(servers[i]->Stats())) serving = i;
    }
  }
  ASSERT_GE(serving, 0) << "no worker took the request";
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // ~13 tokens streamed
  servers[serving]->process->Signal(c.signal);
  call.thread.join();
  if (c.signal == SIGSTOP) servers[serving]->process->Signal(SIGCONT);

  ASSERT_TRUE(call.answer.status.ok()) << call.answer.status.error_message();
  EXPECT_EQ(call.answer.ids, reference.ids) << "a token lost, repeated or changed";
  EXPECT_EQ(call.answer.text, reference.text);
  EXPECT_EQ(call.answer.finish_reason, "length");
  // It did move: the other worker served the rest.
  EXPECT_GT(servers[1 - serving]->Stats().generated_tokens(), 0);
  EXPECT_EQ(MetricValue(ScrapeMetrics(router.http_port), "baton_router_migrations_total"), 1);
}

INSTANTIATE_TEST_SUITE_P(Faults, MigrationTest,
                         ::testing::Values(Case{"ColocatedKilled", false, SIGKILL, false},
                                           Case{"ColocatedKilledSeeded", false, SIGKILL, true},
                                           Case{"SplitDecodeKilled", true, SIGKILL, false},
                                           Case{"ColocatedStoppedSeeded", false, SIGSTOP, true}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.name);
                         });

TEST(Migration, OffWithMigrationLimitZero) {
  const std::vector<std::string> slow = {"--debug-step-delay-ms", "30"};
  WorkerProc a({BATON_BIN, "worker"}, "tcp", slow);
  WorkerProc b({BATON_BIN, "worker"}, "tcp", slow);
  Router router({"--worker", a.target + "," + b.target, "--migration-limit", "0"});
  pb::GenerateRequest req;
  req.set_text("Once upon a time");
  req.mutable_sampling()->set_temperature(0);
  req.mutable_stop()->set_max_tokens(60);
  req.mutable_stop()->set_ignore_eos(true);
  AsyncGenerate call(router, req);
  WorkerProc* serving = nullptr;
  for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
       serving == nullptr && std::chrono::steady_clock::now() < end;) {
    if (a.Stats().running() > 0) serving = &a;
    if (b.Stats().running() > 0) serving = &b;
  }
  ASSERT_NE(serving, nullptr);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  serving->process->Signal(SIGKILL);
  call.thread.join();
  EXPECT_EQ(call.answer.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_GT(call.answer.ids.size(), 0u);
  EXPECT_LT(call.answer.ids.size(), 60u);
}

}  // namespace
}  // namespace baton::testing
