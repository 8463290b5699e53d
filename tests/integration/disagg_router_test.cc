// The whole split path between real processes on loopback: `baton-router` in front of
// `baton-prefill` and `baton-decode` workers (UCX over tcp, then shared memory), against
// `baton-router` in front of a colocated `baton worker`. Through both front doors (the
// baton.v1 gRPC API and the OpenAI HTTP API), the split path answers byte for byte what
// the colocated path answers, also when the router mixes colocated and split workers. Then
// the failures, as a client sees them: a prefill worker killed mid-transfer (the router
// retries on another prefill worker, or prefills on the decode worker), a decode worker
// killed (a clean error, not a hang) and a client that cancels (both legs free their
// pages).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "baton/internal/v1/worker.grpc.pb.h"
#include "baton/v1/baton.grpc.pb.h"
#include "common/strings.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/router_proc.h"
#include "tests/integration/worker_proc.h"

namespace baton::worker {
namespace {

namespace ipb = ::baton::internal::v1;
namespace pb = ::baton::v1;
using baton::testing::Answer;
using baton::testing::AsyncGenerate;
using baton::testing::ChildProcess;
using baton::testing::Complete;
using baton::testing::Generate;
using baton::testing::Router;

const std::string kModel = std::string(BATON_SOURCE_DIR) + "/models/baton-tiny";

// A worker with the bundled model: `baton worker` (colocated) or a role binary.
struct Worker : baton::testing::WorkerProc {
  Worker(const std::string& bin, const std::string& tls, const std::vector<std::string>& extra = {})
      : WorkerProc(bin == BATON_BIN ? std::vector<std::string>{bin, "worker"}
                                    : std::vector<std::string>{bin},
                   tls, extra) {}
};

bool Idle(const ipb::GetStatsResponse& s) { return baton::testing::NoPagesHeld(s); }

std::vector<pb::GenerateRequest> Requests() {
  std::vector<pb::GenerateRequest> out;
  const char* texts[] = {"Once upon a time", "The little dog ran to the park and",
                         "Lily had a red ball. She"};
  for (int i = 0; i < 6; ++i) {
    pb::GenerateRequest r;
    if (i == 5) {
      for (int k = 0; k < 70; ++k) r.mutable_token_ids()->add_ids(3 + (k * 53) % 1200);
    } else {
      r.set_text(texts[i % 3]);
    }
    r.mutable_sampling()->set_seed(100 + i);
    r.mutable_sampling()->set_temperature(i % 2 == 0 ? 0.0 : 0.9);
    r.mutable_stop()->set_max_tokens(16 + i);
    if (i == 3) r.mutable_stop()->add_stop(" the");
    if (i == 4) r.set_logprobs(2);
    out.push_back(r);
  }
  return out;
}

class DisaggRouterTest : public ::testing::TestWithParam<const char*> {};

TEST_P(DisaggRouterTest, SplitAndMixedAnswersEqualColocated) {
  Worker colocated(BATON_BIN, GetParam());
  Worker decode(BATON_DECODE_BIN, GetParam());
  Worker prefill(BATON_PREFILL_BIN, GetParam());
  Router plain({"--worker", colocated.target});
  Router split({"--prefill-worker", prefill.target, "--decode-worker", decode.target});
  Router mixed({"--worker", colocated.target, "--prefill-worker", prefill.target, "--decode-worker",
                decode.target, "--policy", "round_robin"});
  ASSERT_TRUE(plain.stub && split.stub && mixed.stub);
  for (const pb::GenerateRequest& req : Requests()) {
    SCOPED_TRACE(req.ShortDebugString());
    const Answer want = Generate(plain, req);
    ASSERT_TRUE(want.status.ok()) << want.status.error_message();
    for (Router* r : {&split, &mixed, &mixed}) {  // mixed alternates between its workers
      const Answer got = Generate(*r, req);
      ASSERT_TRUE(got.status.ok()) << got.status.error_message();
      EXPECT_EQ(got.ids, want.ids);
      EXPECT_EQ(got.text, want.text);
      EXPECT_EQ(got.finish_reason, want.finish_reason);
      EXPECT_EQ(got.logprobs, want.logprobs);
    }
  }
  // The HTTP front door: non-streaming completions with two choices.
  const nlohmann::json body = {
      {"prompt", "The sun was"}, {"max_tokens", 12}, {"n", 2}, {"seed", 7}, {"temperature", 0.8}};
  const nlohmann::json want = Complete(plain.http_port, body);
  const nlohmann::json got = Complete(split.http_port, body);
  ASSERT_TRUE(want.contains("choices")) << want.dump();
  ASSERT_TRUE(got.contains("choices")) << got.dump();
  EXPECT_EQ(got["choices"], want["choices"]);
  EXPECT_GT(decode.Stats().kv_transfers_admitted(), 0) << "the split path was taken";
  EXPECT_TRUE(Idle(decode.WaitFor(Idle, 5)));
  EXPECT_TRUE(Idle(prefill.WaitFor(Idle, 5)));
}

// A prompt long enough, in one-token chunks, that a worker can be killed mid-transfer.
pb::GenerateRequest Slow() {
  pb::GenerateRequest r;
  for (int k = 0; k < 480; ++k) r.mutable_token_ids()->add_ids(3 + (k * 31) % 1200);
  r.mutable_sampling()->set_seed(5);
  r.mutable_sampling()->set_temperature(0);
  r.mutable_stop()->set_max_tokens(6);
  return r;
}
// The step delay keeps it slow where puts are fast (shared memory writes the decode
// worker's pool directly).
const std::vector<std::string> kSlow = {"--max-prefill-chunk",   "1", "--max-batched-tokens", "256",
                                        "--debug-step-delay-ms", "2"};

bool Reserved(const ipb::GetStatsResponse& s) { return s.kv_reservations() > 0; }

TEST_P(DisaggRouterTest, AKilledPrefillWorkerIsRetriedOrReplacedByTheDecodeWorker) {
  Worker colocated(BATON_BIN, GetParam());
  // The default lease (60 s): the router must release a failed attempt's reservation
  // itself, at once (issue 25 §5), not leave it to expire.
  Worker decode(BATON_DECODE_BIN, GetParam());
  Worker first(BATON_PREFILL_BIN, GetParam(), kSlow);
  Worker second(BATON_PREFILL_BIN, GetParam());
  Router plain({"--worker", colocated.target});
  // The retry goes to the other prefill worker; "local" prefills on the decode worker.
  Router retry({"--prefill-worker", first.target + "," + second.target, "--decode-worker",
                decode.target, "--policy", "round_robin"});
  const Answer want = Generate(plain, Slow());
  ASSERT_TRUE(want.status.ok());
  // Connections are long-lived in a cluster: open both prefill workers' UCX endpoints to
  // the decode worker first. (Debian's UCX 1.13 aborts a process whose peer dies while
  // their handshake is unfinished, openucx/ucx#8175; docs/disaggregation.md.)
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(Generate(retry, Requests()[0]).status.ok());
  {
    AsyncGenerate call(retry, Slow());  // round-robin: the first prefill worker
    ASSERT_TRUE(Reserved(decode.WaitFor(Reserved, 20)));
    first.process->Signal(SIGKILL);
    call.thread.join();
    ASSERT_TRUE(call.answer.status.ok()) << call.answer.status.error_message();
    EXPECT_EQ(call.answer.ids, want.ids);
  }
  Worker third(BATON_PREFILL_BIN, GetParam(), kSlow);
  Router local({"--prefill-worker", third.target, "--decode-worker", decode.target,
                "--prefill-failover", "local"});
  ASSERT_TRUE(Generate(local, Requests()[0]).status.ok());
  {
    AsyncGenerate call(local, Slow());
    ASSERT_TRUE(Reserved(decode.WaitFor(Reserved, 20)));
    third.process->Signal(SIGKILL);
    call.thread.join();
    ASSERT_TRUE(call.answer.status.ok()) << call.answer.status.error_message();
    EXPECT_EQ(call.answer.ids, want.ids);
  }
  // The killed workers' reservations were released when their attempts failed.
  EXPECT_TRUE(Idle(decode.WaitFor(Idle, 3)));
  EXPECT_TRUE(Idle(second.WaitFor(Idle, 5)));
}

TEST_P(DisaggRouterTest, AKilledDecodeWorkerIsACleanErrorAndTheCancelFreesBothLegs) {
  Worker decode(BATON_DECODE_BIN, GetParam());
  Worker prefill(BATON_PREFILL_BIN, GetParam(), kSlow);
  Router split({"--prefill-worker", prefill.target, "--decode-worker", decode.target,
                "--prefill-failover", "none"});
  ASSERT_TRUE(Generate(split, Requests()[0]).status.ok());
  {
    AsyncGenerate call(split, Slow());
    ASSERT_TRUE(Reserved(decode.WaitFor(Reserved, 20)));
    call.ctx.TryCancel();
    call.thread.join();
    EXPECT_EQ(call.answer.status.error_code(), grpc::StatusCode::CANCELLED);
    EXPECT_TRUE(Idle(prefill.WaitFor(Idle, 10)));
    EXPECT_TRUE(Idle(decode.WaitFor(Idle, 10))) << "released at once, not left to expire";
  }
  {
    AsyncGenerate call(split, Slow());
    ASSERT_TRUE(Reserved(decode.WaitFor(Reserved, 20)));
    decode.process->Signal(SIGKILL);
    call.thread.join();
    EXPECT_EQ(call.answer.status.error_code(), grpc::StatusCode::UNAVAILABLE)
        << call.answer.status.error_message();
    EXPECT_TRUE(Idle(prefill.WaitFor(Idle, 15)));
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, DisaggRouterTest, ::testing::Values("tcp", "sm"),
                         [](const ::testing::TestParamInfo<const char*>& p) {
                           return std::string(p.param);
                         });

}  // namespace
}  // namespace baton::worker
