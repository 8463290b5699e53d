// GPU pages on the KV transfer path, between real processes on loopback. Prefill and
// decode workers with --device cuda run the GPU backend on the host emulation of its
// kernels (tests/fakes/host_gpu_plugin.cc, which BATON_CUDA_LIBRARY names), whose pages
// stand for device memory that UCX cannot reach: a transfer leaves a GPU prefill worker
// through the host copy of its pages and lands in a GPU decode worker's host copy, which
// Complete moves to the device (engine/kv_host_mirror.h).
//
// GPU to GPU answers byte for byte what a colocated GPU worker answers, sampled tokens and
// logprobs included: the pages cross bit for bit. CPU to GPU and GPU to CPU mix two
// forwards (the CPU's and the GPU's differ in their last bits), so there greedy tokens are
// compared with a colocated CPU worker's.
#include <cstdlib>
#include <string>
#include <vector>

#include "baton/internal/v1/worker.grpc.pb.h"
#include "baton/v1/baton.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/integration/router_proc.h"
#include "tests/integration/worker_proc.h"

namespace baton::worker {
namespace {

namespace ipb = ::baton::internal::v1;
namespace pb = ::baton::v1;
using baton::testing::Answer;
using baton::testing::Generate;
using baton::testing::Router;

struct Split {
  const char* name;
  const char* prefill;  // device
  const char* decode;
  const char* tls;
};

struct Worker : baton::testing::WorkerProc {
  Worker(const std::string& bin, const char* device, const char* tls)
      : WorkerProc(bin == BATON_BIN ? std::vector<std::string>{bin, "worker"}
                                    : std::vector<std::string>{bin},
                   tls, {"--device", device}) {}
};

std::vector<pb::GenerateRequest> Requests(bool sampled) {
  std::vector<pb::GenerateRequest> out;
  const char* texts[] = {"Once upon a time", "The little dog ran to the park and",
                         "Lily had a red ball. She"};
  for (int i = 0; i < 6; ++i) {
    if (!sampled && i % 2 == 1) continue;
    pb::GenerateRequest r;
    if (i == 4) {  // five pages and a part: several blocks, the last one partial
      for (int k = 0; k < 90; ++k) r.mutable_token_ids()->add_ids(3 + (k * 53) % 1200);
    } else {
      r.set_text(texts[i % 3]);
    }
    r.mutable_sampling()->set_seed(100 + i);
    r.mutable_sampling()->set_temperature(i % 2 == 0 ? 0.0 : 0.9);
    r.mutable_stop()->set_max_tokens(12 + i);
    if (i == 3) r.set_logprobs(2);
    out.push_back(r);
  }
  return out;
}

bool Idle(const ipb::GetStatsResponse& s) { return baton::testing::NoPagesHeld(s); }

class GpuDisaggTest : public ::testing::TestWithParam<Split> {
 protected:
  static void SetUpTestSuite() { ::setenv("BATON_CUDA_LIBRARY", BATON_HOST_GPU_PLUGIN, 1); }
};

TEST_P(GpuDisaggTest, TheSplitAnswersWhatColocatedAnswers) {
  const Split& s = GetParam();
  const bool all_gpu = std::string(s.prefill) == "cuda" && std::string(s.decode) == "cuda";
  Worker colocated(BATON_BIN, all_gpu ? "cuda" : "cpu", s.tls);
  Worker prefill(BATON_PREFILL_BIN, s.prefill, s.tls);
  Worker decode(BATON_DECODE_BIN, s.decode, s.tls);
  Router plain({"--worker", colocated.target});
  Router split({"--prefill-worker", prefill.target, "--decode-worker", decode.target,
                "--prefill-failover", "none"});
  ASSERT_TRUE(plain.stub && split.stub);
  for (const pb::GenerateRequest& req : Requests(all_gpu)) {
    SCOPED_TRACE(req.ShortDebugString());
    const Answer want = Generate(plain, req);
    ASSERT_TRUE(want.status.ok()) << want.status.error_message();
    // Twice: the second time the decode worker's prefix cache holds the prompt's full
    // blocks, and only the rest crosses (the cached pages must not be overwritten).
    for (int round = 0; round < 2; ++round) {
      const Answer got = Generate(split, req);
      ASSERT_TRUE(got.status.ok()) << got.status.error_message();
      EXPECT_EQ(got.ids, want.ids) << "round " << round;
      EXPECT_EQ(got.text, want.text);
      EXPECT_EQ(got.finish_reason, want.finish_reason);
      EXPECT_EQ(got.logprobs, want.logprobs);
    }
  }
  EXPECT_GT(decode.Stats().kv_transfers_admitted(), 0) << "the split path was taken";
  EXPECT_TRUE(Idle(decode.WaitFor(Idle, 5)));
  EXPECT_TRUE(Idle(prefill.WaitFor(Idle, 5)));
}

INSTANTIATE_TEST_SUITE_P(Splits, GpuDisaggTest,
                         ::testing::Values(Split{"gpu_to_gpu_tcp", "cuda", "cuda", "tcp"},
                                           Split{"gpu_to_gpu_sm", "cuda", "cuda", "sm"},
                                           Split{"cpu_to_gpu_tcp", "cpu", "cuda", "tcp"},
                                           Split{"gpu_to_cpu_tcp", "cuda", "cpu", "tcp"}),
                         [](const ::testing::TestParamInfo<Split>& p) {
                           return std::string(p.param.name);
                         });

}  // namespace
}  // namespace baton::worker
