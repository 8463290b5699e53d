// `baton worker --tensor-parallel-size/--pipeline-parallel-size` as users run it: the
// leader starts its ranks as processes on this host, and the group serves the worker
// API exactly as one rank computes (greedy and seeded). A rank killed with SIGKILL or
// stopped with SIGSTOP mid-stream ends the client's stream with an error within 10 s,
// turns the group NOT_SERVING, the other ranks exit, and a new group serves again. Ranks
// started apart meet at the leader's --group-leader port with the shared token.
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "baton/internal/v1/worker.grpc.pb.h"
#include "common/secret_token.h"
#include "common/subprocess.h"
#include "engine/generator.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "service/internal_auth.h"
#include "tests/integration/worker_proc.h"
#include "worker/worker_service.h"

namespace baton::worker {
namespace {

namespace pb = ::baton::internal::v1;
using Clock = std::chrono::steady_clock;

const std::string kModel = std::string(BATON_SOURCE_DIR) + "/models/baton-tiny";

// Running (or stopped), not gone and not a zombie; the ranks are the leader's children,
// so this reads /proc rather than waiting for them.
bool Alive(pid_t pid) {
  const std::string all = ReadProcFile(pid, "stat");
  const size_t paren = all.rfind(')');
  return paren != std::string::npos && all.size() > paren + 2 && all[paren + 2] != 'Z' &&
         all[paren + 2] != 'X';
}

class Leader {
 public:
  explicit Leader(std::vector<std::string> args) {
    // A leader given the cluster token takes internal calls only with it.
    std::shared_ptr<const service::InternalAuth> auth = service::InternalAuth::Open();
    for (size_t i = 0; i + 1 < args.size(); ++i) {
      if (args[i] != "--internal-token-file") continue;
      absl::StatusOr<std::string> token = ReadTokenFile(args[i + 1], args[i]);
      EXPECT_TRUE(token.ok()) << token.status();
      if (token.ok()) auth = service::InternalAuth::WithToken(*token);
    }
    args.insert(args.begin(), {BATON_BIN, "worker", "--model", kModel, "--port", "0", "--threads",
                               "1", "--kv-cache-memory", "16MiB"});
    auto p = Subprocess::Start(std::move(args));
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok()) return;
    process_ = *std::move(p);
    const std::string line = process_->ReadLine(absl::Seconds(120)).value_or("");
    std::smatch m;
    EXPECT_TRUE(std::regex_search(line, m, std::regex(R"(on (127\.0\.0\.1:\d+))"))) << line;
    if (!m.empty()) {
      channel_ = auth->Channel(m[1].str());
      stub_ = pb::Worker::NewStub(channel_);
    }
    ranks_ = baton::testing::ChildrenOf(process_->pid());
  }
  ~Leader() {
    process_.reset();  // SIGKILL, reaped
    for (pid_t r : ranks_) {
      kill(r, SIGKILL);
      waitpid(r, nullptr, WNOHANG);
    }
  }

  // Sends `sig` and waits up to `timeout` for the leader to exit.
  void Stop(int sig, absl::Duration timeout) {
    if (process_ != nullptr) (void)process_->Stop(sig, timeout);
  }

  grpc::health::v1::HealthCheckResponse::ServingStatus Health() {
    auto health = grpc::health::v1::Health::NewStub(channel_);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    grpc::health::v1::HealthCheckResponse resp;
    if (!health->Check(&ctx, {}, &resp).ok()) return grpc::health::v1::HealthCheckResponse::UNKNOWN;
    return resp.status();
  }

  pb::Worker::Stub* stub() { return stub_.get(); }
  const std::vector<pid_t>& ranks() const { return ranks_; }
  pid_t pid() const { return process_ == nullptr ? -1 : process_->pid(); }

 private:
  std::unique_ptr<Subprocess> process_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::Worker::Stub> stub_;
  std::vector<pid_t> ranks_;
};

pb::GenerateRequest Request(int max_tokens, bool greedy) {
  pb::GenerateRequest req;
  for (int i = 0; i < 30; ++i) req.add_prompt_ids(10 + 7 * i);
  req.mutable_params()->set_max_tokens(max_tokens);
  if (greedy) req.mutable_params()->set_temperature(0);
  req.mutable_params()->set_seed(3);
  req.mutable_params()->set_ignore_eos(true);
  req.set_detokenize(true);
  return req;
}

void ExpectOneRanksTokens(Leader& leader) {
  for (bool greedy : {true, false}) {
    const pb::GenerateRequest req = Request(20, greedy);
    grpc::ClientContext ctx;
    auto reader = leader.stub()->Generate(&ctx, req);
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
    EXPECT_EQ(ids, alone->output_ids) << (greedy ? "greedy" : "seeded");
    EXPECT_EQ(text, alone->text);
  }
}

TEST(WorkerGroupProcess, TensorParallelGroupServesOneRanksTokens) {
  Leader leader({"--tensor-parallel-size", "2"});
  ASSERT_NE(leader.stub(), nullptr);
  EXPECT_EQ(leader.ranks().size(), 1u);
  EXPECT_EQ(leader.Health(), grpc::health::v1::HealthCheckResponse::SERVING);
  ExpectOneRanksTokens(leader);
}

TEST(WorkerGroupProcess, PipelineAndTensorParallelGroupServesOneRanksTokens) {
  Leader leader({"--tp", "2", "--pp", "2"});
  ASSERT_NE(leader.stub(), nullptr);
  EXPECT_EQ(leader.ranks().size(), 3u);
  ExpectOneRanksTokens(leader);
}

// Streams a long request, does `hurt` to rank 1 after the first tokens, and checks what
// the client and the processes see.
void HurtARankMidStream(int signal) {
  // The timeout also bounds the ranks' rendezvous, which four ASan processes loading the
  // model on two busy cores once missed at 2000 ms; the checks below allow up to 5 s.
  Leader leader(
      {"--tp", "2", "--pp", "2", "--group-timeout-ms", "3000", "--debug-step-delay-ms", "20"});
  ASSERT_NE(leader.stub(), nullptr);
  ASSERT_EQ(leader.ranks().size(), 3u);
  const pid_t rank1 = leader.ranks()[1];
  grpc::ClientContext ctx;
  auto reader = leader.stub()->Generate(&ctx, Request(400, true));
  pb::GenerateResponse r;
  int tokens = 0;
  while (tokens < 3 && reader->Read(&r)) tokens += r.token_ids_size();
  ASSERT_EQ(tokens, 3);
  const auto hurt_at = Clock::now();
  kill(rank1, signal);
  while (reader->Read(&r)) {
  }
  const grpc::Status end = reader->Finish();
  const auto ended = Clock::now() - hurt_at;
  EXPECT_FALSE(end.ok());
  EXPECT_EQ(end.error_code(), grpc::StatusCode::UNAVAILABLE) << end.error_message();
  EXPECT_LT(ended, std::chrono::seconds(10));
  // NOT_SERVING, and the leader still answers (it does not hang).
  auto deadline = hurt_at + std::chrono::seconds(5);
  auto health = leader.Health();
  while (health != grpc::health::v1::HealthCheckResponse::NOT_SERVING && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    health = leader.Health();
  }
  EXPECT_EQ(health, grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  // A new request is refused at once with the group's error.
  grpc::ClientContext ctx2;
  auto again = leader.stub()->Generate(&ctx2, Request(4, true));
  while (again->Read(&r)) {
  }
  EXPECT_EQ(again->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  // The other ranks leave their collectives and exit instead of waiting forever.
  deadline = hurt_at + std::chrono::seconds(10);
  for (pid_t r : leader.ranks()) {
    if (r == rank1) continue;
    while (Clock::now() < deadline && Alive(r)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_FALSE(Alive(r)) << "rank pid " << r << " still runs";
  }
  if (signal == SIGSTOP) kill(rank1, SIGKILL);
  // A new group serves again.
  Leader fresh({"--tp", "2"});
  ASSERT_NE(fresh.stub(), nullptr);
  grpc::ClientContext ctx3;
  auto ok = fresh.stub()->Generate(&ctx3, Request(4, true));
  int got = 0;
  while (ok->Read(&r)) got += r.token_ids_size();
  EXPECT_TRUE(ok->Finish().ok());
  EXPECT_EQ(got, 4);
}

TEST(WorkerGroupProcess, KillNineOfARankEndsTheStreamAndTheGroup) { HurtARankMidStream(SIGKILL); }

TEST(WorkerGroupProcess, SigstopOfARankEndsTheStreamAndTheGroup) { HurtARankMidStream(SIGSTOP); }

TEST(WorkerGroupProcess, ALeaderThatStopsTakesItsRanksWithIt) {
  std::vector<pid_t> ranks;
  {
    Leader leader({"--tp", "2"});
    ranks = leader.ranks();
    ASSERT_EQ(ranks.size(), 1u);
    EXPECT_TRUE(Alive(ranks[0]));
    leader.Stop(SIGTERM, absl::Seconds(10));
  }
  // The rank was the leader's child: it is gone (reaped by init) within a moment.
  for (int i = 0; i < 200 && Alive(ranks[0]); ++i) usleep(10000);
  EXPECT_FALSE(Alive(ranks[0]));
}

// Runs `baton worker ARGS` to its end; its exit code and what it wrote to stderr.
std::pair<int, std::string> RunToExit(std::vector<std::string> args) {
  args.insert(args.begin(), {BATON_BIN, "worker", "--model", kModel, "--port", "0",
                             "--kv-cache-memory", "16MiB"});
  return baton::testing::RunToExit(std::move(args));
}

TEST(WorkerGroupProcess, ASplitThatCutsHeadsIsRefusedWithTheFlagsName) {
  auto [status, err] = RunToExit({"--tp", "3"});
  EXPECT_EQ(status, 1);
  EXPECT_NE(err.find("--tensor-parallel-size 3"), std::string::npos) << err;
}

// A port nothing listens on now (the kernel's choice of a free one).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

std::string TokenFile(const std::string& name, const std::string& token) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << token << "\n";
  return path;
}

// Ranks started one by one, as an operator (or a LeaderWorkerSet) starts them on their
// hosts: rank 1 first, dialling the leader until it is up; they meet at the leader's
// --group-leader port with the shared token, and serve one rank's tokens.
TEST(WorkerGroupProcess, RanksStartedApartMeetAtTheLeaderAndServeOneRanksTokens) {
  const std::string leader_at = "127.0.0.1:" + std::to_string(FreePort());
  const std::string token = TokenFile("group_token", "a-secret-shared-by-every-rank-0123");
  const std::vector<std::string> group = {
      "--tp",           "2",       "--group-size",          "2",
      "--group-leader", leader_at, "--internal-token-file", token};
  std::vector<std::string> rank1_args = group;
  rank1_args.insert(rank1_args.end(), {"--group-rank", "1"});
  Leader rank1(rank1_args);  // its first line is its health port
  std::vector<std::string> leader_args = group;
  leader_args.insert(leader_args.end(), {"--group-rank", "0"});
  Leader leader(leader_args);
  ASSERT_NE(leader.stub(), nullptr);
  EXPECT_TRUE(leader.ranks().empty());  // it started no rank of its own
  EXPECT_EQ(leader.Health(), grpc::health::v1::HealthCheckResponse::SERVING);
  ExpectOneRanksTokens(leader);

  // A rank with another token is refused at the leader's door and exits with the reason.
  const std::string wrong = TokenFile("wrong_token", "not-the-secret-of-this-group-0123");
  auto [status, err] = RunToExit({"--tp", "2", "--group-rank", "1", "--group-leader", leader_at,
                                  "--internal-token-file", wrong});
  EXPECT_EQ(status, 1);
  EXPECT_NE(err.find("--internal-token-file"), std::string::npos) << err;
  // The group still serves.
  ExpectOneRanksTokens(leader);
}

TEST(WorkerGroupProcess, MultiHostFlagsThatCannotMeetAreRefusedByName) {
  const std::string token = TokenFile("group_token2", "a-secret-shared-by-every-rank-0123");
  const struct {
    std::vector<std::string> args;
    const char* names;
  } cases[] = {
      {{"--tp", "2", "--group-rank", "1"}, "--group-leader"},
      {{"--tp", "2", "--group-rank", "1", "--group-leader", "127.0.0.1:1"},
       "--internal-token-file"},
      {{"--tp", "2", "--group-size", "3", "--group-rank", "1", "--group-leader", "127.0.0.1:1",
        "--internal-token-file", token},
       "--group-size 3"},
      {{"--tp", "2", "--group-rank", "2", "--group-leader", "127.0.0.1:1", "--internal-token-file",
        token},
       "--group-rank 2"},
      {{"--tp", "2", "--group-leader", "nohostport", "--internal-token-file", token},
       "--group-leader"},
      {{"--tp", "2", "--group-leader", "127.0.0.1:1", "--internal-token-file",
        TokenFile("short_token", "short")},
       "16 to 4096"},
  };
  for (const auto& c : cases) {
    auto [status, err] = RunToExit(c.args);
    EXPECT_EQ(status, 1) << c.names;
    EXPECT_NE(err.find(c.names), std::string::npos) << err;
  }
}

}  // namespace
}  // namespace baton::worker
