// Split clusters whose pools are worker groups (docs/parallel.md, "KV transfers with
// groups"), between real processes on loopback: `baton-prefill` and `baton-decode`, each
// with its own tensor- and pipeline-parallel sizes, over UCX tcp and shared memory. Every
// prefill rank writes its own slice of each prompt's K/V straight into the decode ranks
// that hold it; each decode rank checks its part before the leader admits the sequence.
// The greedy tokens are those of one rank computing alone (engine::Generate), for prompts
// with partial last blocks, repeated prompts (the decode side's prefix cache), and
// prompts longer than one prefill chunk.
#include <dirent.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "baton/internal/v1/worker.grpc.pb.h"
#include "common/strings.h"
#include "engine/generator.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/integration/worker_proc.h"
#include "worker/worker_service.h"

namespace baton::worker {
namespace {

namespace pb = ::baton::internal::v1;
using baton::testing::NoPagesHeld;

const std::string kModel = std::string(BATON_SOURCE_DIR) + "/models/baton-tiny";

struct Split {
  const char* name;
  std::vector<std::string> prefill;  // group flags
  std::vector<std::string> decode;
};

struct Case {
  const char* tls;
  Split split;
};

std::vector<std::string> With(std::vector<std::string> flags,
                              const std::vector<std::string>& more) {
  flags.insert(flags.end(), more.begin(), more.end());
  return flags;
}

pb::GenerateRequest Request(const std::string& id, int prompt_len, int salt, int max_tokens) {
  pb::GenerateRequest r;
  r.set_request_id(id);
  for (int i = 0; i < prompt_len; ++i) r.add_prompt_ids(5 + (i * 37 + salt) % 1200);
  r.mutable_params()->set_max_tokens(max_tokens);
  r.mutable_params()->set_temperature(0.0);
  r.set_detokenize(true);
  return r;
}

class DisaggGroupTest : public ::testing::TestWithParam<Case> {};

TEST_P(DisaggGroupTest, TokensMatchOneRank) {
  const Case& c = GetParam();
  baton::testing::WorkerProc decode({BATON_DECODE_BIN}, c.tls, c.split.decode);
  // A small chunk: a long prompt's K/V crosses in several steps.
  baton::testing::WorkerProc prefill({BATON_PREFILL_BIN}, c.tls,
                                     With(c.split.prefill, {"--max-prefill-chunk", "64"}));
  ASSERT_TRUE(decode.stub && prefill.stub);
  auto loaded = engine::LoadModel(kModel);
  ASSERT_TRUE(loaded.ok());
  ThreadPool threads(1);
  const struct {
    int prompt;
    int salt;
    int max_tokens;
  } cases[] = {{40, 1, 10}, {40, 1, 10}, {17, 3, 12}, {16, 4, 6}, {150, 9, 8}};
  int n = 0;
  for (const auto& k : cases) {
    const pb::GenerateRequest req = Request(StrCat("r", n++), k.prompt, k.salt, k.max_tokens);
    SCOPED_TRACE(req.request_id());
    pb::PrefillRequest p;
    *p.mutable_request() = req;
    p.set_decode_worker(decode.target);
    pb::PrefillResponse pre;
    {
      grpc::ClientContext ctx;
      const grpc::Status s = prefill.stub->Prefill(&ctx, p, &pre);
      ASSERT_TRUE(s.ok()) << s.error_message();
    }
    pb::GenerateRequest gen = req;
    gen.set_kv_transfer_id(req.request_id());
    grpc::ClientContext ctx;
    auto reader = decode.stub->Generate(&ctx, gen);
    std::vector<int32_t> ids;
    std::string text;
    pb::GenerateResponse r;
    while (reader->Read(&r)) {
      ids.insert(ids.end(), r.token_ids().begin(), r.token_ids().end());
      text += r.text();
    }
    const grpc::Status s = reader->Finish();
    ASSERT_TRUE(s.ok()) << s.error_message();
    auto request = FromProto(req);
    ASSERT_TRUE(request.ok());
    auto want =
        engine::Generate(*loaded, &threads, request->prompt_ids, request->params, {}, nullptr);
    ASSERT_TRUE(want.ok());
    EXPECT_EQ(ids, want->output_ids);
    EXPECT_EQ(text, want->text);
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids[0], pre.first_token());
    EXPECT_GT(pre.bytes_sent(), 0);
  }
  EXPECT_EQ(decode.Stats().kv_transfers_admitted(), static_cast<int64_t>(std::size(cases)));
  EXPECT_TRUE(NoPagesHeld(decode.WaitFor(NoPagesHeld, 5)));
  EXPECT_TRUE(NoPagesHeld(prefill.WaitFor(NoPagesHeld, 5)));
}

const std::vector<std::string> kOne = {};
const std::vector<std::string> kTp2 = {"--tensor-parallel-size", "2"};
const std::vector<std::string> kPp2 = {"--pipeline-parallel-size", "2"};
// Four ranks over two KV heads: each head is held twice, and only one of its ranks sends.
const std::vector<std::string> kTp4 = {"--tensor-parallel-size", "4"};

const Split kSplits[] = {
    {"P_tp2_to_D_tp1", kTp2, kOne}, {"P_tp1_to_D_tp2", kOne, kTp2}, {"P_tp2_to_D_tp2", kTp2, kTp2},
    {"P_pp2_to_D_tp2", kPp2, kTp2}, {"P_tp2_to_D_pp2", kTp2, kPp2}, {"P_tp4_to_D_tp1", kTp4, kOne},
};

std::vector<Case> Cases() {
  std::vector<Case> out;
  for (const char* tls : {"tcp", "sm"}) {
    for (const Split& s : kSplits) out.push_back({tls, s});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Splits, DisaggGroupTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return StrCat(info.param.tls, "_", info.param.split.name);
                         });

// A rank of either side's group killed with SIGKILL while a long prompt crosses: the
// Prefill call ends with an error within 10 s, and the side that lives frees every page
// the transfer held.
class DisaggGroupFaultTest : public ::testing::TestWithParam<bool> {};

TEST_P(DisaggGroupFaultTest, KillNineOfARankFailsTheTransferCleanly) {
  const bool kill_prefill_rank = GetParam();
  const std::vector<std::string> group = {"--tensor-parallel-size", "2", "--group-timeout-ms",
                                          "2000"};
  // One-token chunks and a step delay: the prompt takes seconds to cross.
  const std::vector<std::string> slow = {
      "--max-prefill-chunk", "1", "--max-batched-tokens", "256", "--debug-step-delay-ms", "2"};
  baton::testing::WorkerProc decode({BATON_DECODE_BIN}, "tcp", kill_prefill_rank ? kOne : group);
  baton::testing::WorkerProc prefill({BATON_PREFILL_BIN}, "tcp",
                                     With(kill_prefill_rank ? group : kOne, slow));
  ASSERT_TRUE(decode.stub && prefill.stub);
  baton::testing::WorkerProc& hurt = kill_prefill_rank ? prefill : decode;
  baton::testing::WorkerProc& lives = kill_prefill_rank ? decode : prefill;
  const std::vector<pid_t> ranks = baton::testing::ChildrenOf(hurt.process->pid());
  ASSERT_EQ(ranks.size(), 1u);
  // A first small transfer opens every UCX endpoint: Debian's UCX 1.13 aborts a process
  // whose peer dies mid-handshake (openucx/ucx#8175; docs/disaggregation.md).
  {
    pb::PrefillRequest p;
    *p.mutable_request() = Request("warm-up", 20, 1, 2);
    p.set_decode_worker(decode.target);
    pb::PrefillResponse pre;
    grpc::ClientContext ctx;
    ASSERT_TRUE(prefill.stub->Prefill(&ctx, p, &pre).ok());
    grpc::ClientContext release;
    pb::GenerateRequest gen = p.request();
    gen.set_kv_transfer_id("warm-up");
    auto reader = decode.stub->Generate(&release, gen);
    pb::GenerateResponse r;
    while (reader->Read(&r)) {
    }
    ASSERT_TRUE(reader->Finish().ok());
  }
  pb::PrefillRequest p;
  *p.mutable_request() = Request("long", 480, 2, 4);
  p.set_decode_worker(decode.target);
  grpc::Status status;
  std::chrono::steady_clock::time_point ended;
  std::thread call([&] {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    pb::PrefillResponse pre;
    status = prefill.stub->Prefill(&ctx, p, &pre);
    ended = std::chrono::steady_clock::now();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  const auto killed = std::chrono::steady_clock::now();
  kill(ranks[0], SIGKILL);
  call.join();
  EXPECT_FALSE(status.ok()) << "the prompt crossed although a rank died";
  EXPECT_LT(ended - killed, std::chrono::seconds(10)) << status.error_message();
  // The live side holds nothing for the failed transfer (the decode side frees it on the
  // sender's Release, or at the lease's end).
  EXPECT_TRUE(NoPagesHeld(lives.WaitFor(NoPagesHeld, 10)));
}

INSTANTIATE_TEST_SUITE_P(Sides, DisaggGroupFaultTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "PrefillRank" : "DecodeRank");
                         });

}  // namespace
}  // namespace baton::worker
