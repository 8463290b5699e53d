// A worker that stops answering without closing its connections (SIGSTOP: the kernel
// still acknowledges its TCP segments) is noticed by the router's keepalive pings within
// about 2 s, and the stream it was serving ends within 5 s (issue 25 §5). Before, the
// router's pings came every 10 s, waited 5 s, and stopped after two without data: its
// streams stalled 15-19 s.
#include <signal.h>

#include <chrono>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/integration/router_proc.h"
#include "tests/integration/worker_proc.h"

namespace baton::testing {
namespace {

bool Running(const baton::internal::v1::GetStatsResponse& s) { return s.running() > 0; }

TEST(HungWorker, AStoppedWorkersStreamEndsWithinFiveSeconds) {
  // Slow steps keep the stream open long enough to stop the worker in the middle of it.
  WorkerProc worker({BATON_BIN, "worker"}, "tcp", {"--debug-step-delay-ms", "50"});
  ASSERT_FALSE(worker.target.empty());
  Router router({"--worker", worker.target});
  ASSERT_NE(router.stub, nullptr);
  ::baton::v1::GenerateRequest req;
  req.set_text("Once upon a time");
  req.mutable_sampling()->set_temperature(0);
  req.mutable_stop()->set_max_tokens(400);  // 20 s of steps: far longer than the bound
  req.mutable_stop()->set_ignore_eos(true);
  AsyncGenerate call(router, req);
  ASSERT_TRUE(Running(worker.WaitFor(Running, 20)));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // tokens are streaming
  const auto stopped = std::chrono::steady_clock::now();
  worker.process->Signal(SIGSTOP);
  call.thread.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped).count();
  worker.process->Signal(SIGCONT);
  EXPECT_FALSE(call.answer.status.ok()) << "the stream should end with an error";
  EXPECT_LT(seconds, 5.0) << "the stream stalled " << seconds << " s after SIGSTOP ("
                          << call.answer.status.error_message() << ")";
  EXPECT_GT(call.answer.ids.size(), 0u) << "it was stopped mid-stream";
  EXPECT_LT(call.answer.ids.size(), 400u);
}

}  // namespace
}  // namespace baton::testing
