// `baton worker` as a separate process on loopback: it announces its port, answers the
// standard health check, serves Generate to a real client exactly as the in-process
// single-sequence path computes it, and stops cleanly on SIGTERM.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <regex>
#include <string>
#include <vector>

#include "baton/internal/v1/worker.grpc.pb.h"
#include "engine/generator.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "worker/worker_service.h"

extern char** environ;

namespace baton::worker {
namespace {

namespace pb = ::baton::internal::v1;

const std::string kModel = std::string(BATON_SOURCE_DIR) + "/models/baton-tiny";

class WorkerProcess {
 public:
  explicit WorkerProcess(std::vector<std::string> args) {
    int fds[2];
    EXPECT_EQ(pipe(fds), 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    args.insert(args.begin(), BATON_BIN);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    EXPECT_EQ(posix_spawn(&pid_, BATON_BIN, &actions, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    out_ = fds[0];
  }
  ~WorkerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(out_);
  }

  // The first stdout line, or "" after `timeout_ms`.
  std::string FirstLine(int timeout_ms) {
    std::string line;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{out_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      char c;
      if (read(out_, &c, 1) != 1) break;
      if (c == '\n') return line;
      line += c;
    }
    return "";
  }

  // Sends `sig` and waits up to `timeout_ms` for the exit status; -1 on timeout.
  int Stop(int sig, int timeout_ms) {
    kill(pid_, sig);
    for (int waited = 0; waited < timeout_ms; waited += 10) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      usleep(10000);
    }
    return -1;
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
};

TEST(WorkerProcessTest, ServesHealthAndGenerateThenStopsOnSigterm) {
  WorkerProcess worker(
      {"worker", "--model", kModel, "--port", "0", "--threads", "1", "--kv-cache-memory", "16MiB"});
  const std::string line = worker.FirstLine(60000);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(line, m, std::regex(R"(on 127\.0\.0\.1:(\d+))"))) << line;
  auto channel = grpc::CreateChannel("127.0.0.1:" + m[1].str(), grpc::InsecureChannelCredentials());

  {
    auto health = grpc::health::v1::Health::NewStub(channel);
    grpc::ClientContext ctx;
    grpc::health::v1::HealthCheckResponse resp;
    ASSERT_TRUE(health->Check(&ctx, {}, &resp).ok());
    EXPECT_EQ(resp.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  }

  pb::GenerateRequest req;
  for (int i = 0; i < 30; ++i) req.add_prompt_ids(10 + 7 * i);
  req.mutable_params()->set_max_tokens(20);
  req.mutable_params()->set_seed(3);
  req.set_detokenize(true);
  auto stub = pb::Worker::NewStub(channel);
  grpc::ClientContext ctx;
  auto reader = stub->Generate(&ctx, req);
  std::vector<int32_t> ids;
  std::string text;
  pb::GenerateResponse r;
  while (reader->Read(&r)) {
    ids.insert(ids.end(), r.token_ids().begin(), r.token_ids().end());
    text += r.text();
  }
  ASSERT_TRUE(reader->Finish().ok());

  auto loaded = engine::LoadModel(kModel);
  ASSERT_TRUE(loaded.ok());
  auto request = FromProto(req);
  ASSERT_TRUE(request.ok());
  ThreadPool threads(1);
  auto alone =
      engine::Generate(*loaded, &threads, request->prompt_ids, request->params, {}, nullptr);
  ASSERT_TRUE(alone.ok());
  EXPECT_EQ(ids, alone->output_ids);
  EXPECT_EQ(text, alone->text);

  EXPECT_EQ(worker.Stop(SIGTERM, 10000), 0);
}

TEST(WorkerProcessTest, ABadFlagIsAClearErrorAndExitCode) {
  WorkerProcess worker({"worker", "--model", kModel, "--kv-cache-memory", "lots"});
  EXPECT_EQ(worker.FirstLine(30000), "");
  EXPECT_EQ(worker.Stop(0, 30000), 1);  // signal 0: just wait for its own exit
  // A value outside the flag's choices is refused by the flag parser (its own exit code).
  WorkerProcess dtype({"worker", "--model", kModel, "--kv-cache-dtype", "f16"});
  EXPECT_EQ(dtype.FirstLine(30000), "");
  EXPECT_GT(dtype.Stop(0, 30000), 0);
}

// --kv-cache-dtype reaches the engine: the worker announces its pages' type, and the same
// memory holds twice as many bf16 pages (the default) as f32 ones.
TEST(WorkerProcessTest, TheKvCacheDtypeSetsThePages) {
  int64_t pages[2] = {0, 0};
  const char* dtypes[2] = {"bf16", "f32"};
  for (int i = 0; i < 2; ++i) {
    std::vector<std::string> args = {
        "worker", "--model", kModel, "--port", "0", "--threads", "1", "--kv-cache-memory", "16MiB"};
    if (i == 1) args.insert(args.end(), {"--kv-cache-dtype", "f32"});
    WorkerProcess worker(args);
    const std::string line = worker.FirstLine(60000);
    std::smatch m;
    ASSERT_TRUE(std::regex_search(line, m, std::regex(R"(\((\d+) (\w+) KV pages of 16 tokens\))")))
        << line;
    pages[i] = std::stoll(m[1].str());
    EXPECT_EQ(m[2].str(), dtypes[i]) << line;
    EXPECT_EQ(worker.Stop(SIGTERM, 10000), 0);
  }
  EXPECT_EQ(pages[0], 2 * pages[1]);
}

}  // namespace
}  // namespace baton::worker
