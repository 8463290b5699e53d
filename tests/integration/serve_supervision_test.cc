// `baton serve --prefill 1 --decode 1` restarts a worker that dies (issue 26 §3): before,
// a killed decode child stayed defunct and every request got 503 for as long as one waited.
// Here the decode child is killed with SIGKILL; requests succeed again within 30 s, the
// restart is counted in baton_serve_worker_restarts_total, and `baton serve` still stops
// cleanly.
#include <signal.h>

#include <chrono>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/integration/worker_proc.h"

namespace baton::testing {
namespace {

using Clock = std::chrono::steady_clock;

std::string Cmdline(pid_t pid) {
  std::string s = ReadProcFile(pid, "cmdline");
  for (char& c : s) {
    if (c == '\0') c = ' ';
  }
  return s;
}

bool Completes(int port) {
  const std::string body = R"({"model":"baton-tiny","prompt":"Once upon a time","max_tokens":4})";
  const std::string reply =
      HttpExchange(port,
                   "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   "Connection: close\r\nContent-Length: " +
                       std::to_string(body.size()) + "\r\n\r\n" + body);
  return reply.find("\"choices\"") != std::string::npos;
}

TEST(ServeSupervision, AKilledWorkerIsStartedAgainAndRequestsSucceedAgain) {
  ChildProcess serve({BATON_BIN, "serve", "--model",
                      std::string(BATON_SOURCE_DIR) + "/models/baton-tiny", "--port", "0",
                      "--grpc-port", "0", "--prefill", "1", "--decode", "1", "--threads", "1",
                      "--kv-cache-memory", "16MiB", "--ucx-tls", "tcp"});
  const std::string banner = serve.ReadLine();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(banner, m, std::regex(R"(http://127\.0\.0\.1:(\d+) )"))) << banner;
  const int port = std::stoi(m[1].str());
  ASSERT_TRUE(Completes(port));

  pid_t decode = -1;
  for (pid_t child : ChildrenOf(serve.pid())) {
    if (Cmdline(child).find("--role decode") != std::string::npos) decode = child;
  }
  ASSERT_GT(decode, 0) << "no decode child of baton serve";
  ASSERT_EQ(kill(decode, SIGKILL), 0);
  const auto killed = Clock::now();
  bool back = false;
  while (!back && Clock::now() - killed < std::chrono::seconds(30)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    back = Completes(port);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - killed).count();
  ASSERT_TRUE(back) << "no completion within 30 s of the decode worker's death";
  std::printf(
      "serve supervision: requests succeed again %.2f s after kill -9 of the decode worker\n",
      seconds);
  pid_t again = -1;
  for (pid_t child : ChildrenOf(serve.pid())) {
    if (Cmdline(child).find("--role decode") != std::string::npos) again = child;
  }
  EXPECT_GT(again, 0);
  EXPECT_NE(again, decode) << "the decode worker was not started again";
  EXPECT_EQ(MetricValue(ScrapeMetrics(port), R"(baton_serve_worker_restarts_total{role="decode"})"),
            1);

  serve.Signal(SIGTERM);
  EXPECT_EQ(serve.Wait(), 0);
}

}  // namespace
}  // namespace baton::testing
