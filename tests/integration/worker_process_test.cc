// `baton worker` as a separate process on loopback: it announces its port, answers the
// standard health check, serves Generate to a real client exactly as the in-process
// single-sequence path computes it, and stops cleanly on SIGTERM.
#include <signal.h>

#include <chrono>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "baton/internal/v1/worker.grpc.pb.h"
#include "common/subprocess.h"
#include "engine/generator.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "worker/worker_service.h"

namespace baton::worker {
namespace {

namespace pb = ::baton::internal::v1;

const std::string kModel = std::string(BATON_SOURCE_DIR) + "/models/baton-tiny";

class WorkerProcess {
 public:
  explicit WorkerProcess(std::vector<std::string> args) {
    args.insert(args.begin(), BATON_BIN);
    auto p = Subprocess::Start(std::move(args));
    EXPECT_TRUE(p.ok()) << p.status();
    if (p.ok()) process_ = *std::move(p);
  }

  // The first stdout line, or "" after `timeout_ms`.
  std::string FirstLine(int timeout_ms) {
    if (process_ == nullptr) return "";
    return process_->ReadLine(absl::Milliseconds(timeout_ms)).value_or("");
  }

  // Sends `sig` and waits up to `timeout_ms` for the exit status; -1 on timeout.
  int Stop(int sig, int timeout_ms) {
    if (process_ == nullptr) return -1;
    return process_->Stop(sig, absl::Milliseconds(timeout_ms)).value_or(-1);
  }

 private:
  std::unique_ptr<Subprocess> process_;
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
