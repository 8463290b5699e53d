// Disaggregated serving between real processes on loopback: `baton-prefill` computes each
// prompt and writes its K/V into `baton-decode`'s pages over UCX (tcp, then shared memory),
// and the decode worker continues the request. For several prompts and seeds the tokens
// are exactly those of the single-sequence path. Then the failures of issue 6: a prefill
// worker killed mid-transfer (the decode worker frees the pages at the lease's end), a
// decode worker killed mid-transfer (the prefill call fails cleanly and the prefill worker
// frees its pages), and a caller that cancels (both sides free what they hold). After
// each, the page counters are back where they started.
#include <signal.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "baton/internal/v1/kv_transfer.grpc.pb.h"
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

const std::string kModel = std::string(BATON_SOURCE_DIR) + "/models/baton-tiny";

// A role binary with the bundled model.
struct Worker : baton::testing::WorkerProc {
  Worker(const std::string& bin, const std::string& tls, const std::vector<std::string>& extra = {})
      : WorkerProc({bin}, tls, extra) {}
};

using baton::testing::NoPagesHeld;

pb::GenerateRequest Request(const std::string& id, int prompt_len, uint64_t seed, int max_tokens) {
  pb::GenerateRequest r;
  r.set_request_id(id);
  for (int i = 0; i < prompt_len; ++i)
    r.add_prompt_ids(5 + (i * 37 + static_cast<int>(seed)) % 1200);
  r.mutable_params()->set_max_tokens(max_tokens);
  r.mutable_params()->set_seed(seed);
  r.mutable_params()->set_temperature(seed % 2 == 0 ? 0.0 : 0.8);
  if (seed % 3 == 0) r.mutable_params()->set_logprobs(2);
  r.set_detokenize(true);
  return r;
}

grpc::Status Prefill(Worker& prefill, const std::string& decode_target,
                     const pb::GenerateRequest& req, pb::PrefillResponse* out,
                     grpc::ClientContext* ctx = nullptr) {
  pb::PrefillRequest p;
  *p.mutable_request() = req;
  p.set_decode_worker(decode_target);
  grpc::ClientContext local;
  if (ctx == nullptr) ctx = &local;
  return prefill.stub->Prefill(ctx, p, out);
}

struct Output {
  std::vector<int32_t> ids;
  std::string text;
  std::vector<float> logprobs;
  grpc::Status status;
};

Output Generate(Worker& w, pb::GenerateRequest req, const std::string& transfer_id,
                grpc::ClientContext* ctx = nullptr) {
  req.set_kv_transfer_id(transfer_id);
  grpc::ClientContext local;
  if (ctx == nullptr) ctx = &local;
  auto reader = w.stub->Generate(ctx, req);
  Output o;
  pb::GenerateResponse r;
  while (reader->Read(&r)) {
    o.ids.insert(o.ids.end(), r.token_ids().begin(), r.token_ids().end());
    o.text += r.text();
    for (const auto& lp : r.logprobs()) o.logprobs.push_back(lp.logprob());
  }
  o.status = reader->Finish();
  return o;
}

class DisaggProcessTest : public ::testing::TestWithParam<const char*> {};

TEST_P(DisaggProcessTest, OutputsMatchTheSingleSequencePath) {
  Worker decode(BATON_DECODE_BIN, GetParam(), {"--metrics-port", "0"});
  Worker prefill(BATON_PREFILL_BIN, GetParam(), {"--metrics-port", "0"});
  ASSERT_TRUE(decode.stub && prefill.stub);
  auto loaded = engine::LoadModel(kModel);
  ASSERT_TRUE(loaded.ok());
  ThreadPool threads(1);
  const struct {
    int prompt;
    uint64_t seed;
    int max_tokens;
  } cases[] = {{40, 1, 12}, {40, 2, 12}, {17, 3, 20}, {100, 4, 8}, {16, 6, 5}, {230, 9, 10}};
  int n = 0;
  double prompt_tokens = 0;
  double generated_tokens = 0;
  for (const auto& c : cases) {
    const pb::GenerateRequest req = Request(StrCat("r", n++), c.prompt, c.seed, c.max_tokens);
    SCOPED_TRACE(req.request_id());
    pb::PrefillResponse pre;
    grpc::Status s = Prefill(prefill, decode.target, req, &pre);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(pre.usage().prompt_tokens(), c.prompt);
    const Output got = Generate(decode, req, req.request_id());
    ASSERT_TRUE(got.status.ok()) << got.status.error_message();
    auto request = FromProto(req);
    ASSERT_TRUE(request.ok());
    auto want =
        engine::Generate(*loaded, &threads, request->prompt_ids, request->params, {}, nullptr);
    ASSERT_TRUE(want.ok());
    EXPECT_EQ(got.ids, want->output_ids);
    EXPECT_EQ(got.text, want->text);
    ASSERT_FALSE(got.ids.empty());
    EXPECT_EQ(got.ids[0], pre.first_token());
    prompt_tokens += c.prompt;
    generated_tokens += static_cast<double>(got.ids.size());
    if (req.params().has_logprobs()) {
      EXPECT_EQ(got.logprobs.size(), got.ids.size()) << "the first token's logprob travels too";
    }
  }
  // The second request repeats the first one's prompt: the decode worker already held its
  // two full blocks, so only the last, partial one crossed.
  EXPECT_GT(decode.Stats().kv_transfers_admitted(), 0);
  EXPECT_TRUE(NoPagesHeld(decode.WaitFor(NoPagesHeld, 5)));
  EXPECT_TRUE(NoPagesHeld(prefill.WaitFor(NoPagesHeld, 5)));

  // Both sides counted every transfer (docs/disaggregation.md, "Metrics").
  const double transfers = static_cast<double>(std::size(cases));
  const std::string sent = baton::testing::ScrapeMetrics(prefill.metrics_port);
  const std::string received = baton::testing::ScrapeMetrics(decode.metrics_port);
  EXPECT_EQ(baton::testing::MetricValue(sent, R"(baton_kv_transfer_bytes_count{side="sender"})"),
            transfers)
      << sent;
  EXPECT_EQ(
      baton::testing::MetricValue(received, R"(baton_kv_transfer_bytes_count{side="receiver"})"),
      transfers)
      << received;
  EXPECT_EQ(baton::testing::MetricValue(sent, "baton_kv_transfer_seconds_count"), transfers);
  EXPECT_EQ(baton::testing::MetricValue(received, "baton_kv_leases_held"), 0);
  EXPECT_EQ(baton::testing::MetricValue(received, "baton_kv_pages_reserved"), 0);
  const std::string model = loaded->name;
  EXPECT_EQ(baton::testing::MetricValue(
                received, StrCat(R"(baton_kv_cache_pages_used{model_name=")", model, R"("})")),
            0);

  // The engine's set on both roles, moving with the requests: each side ended every
  // request and saw its whole prompt; only the decode worker generated past the first token.
  for (const std::string* text : {&sent, &received}) {
    SCOPED_TRACE(text == &sent ? "prefill worker" : "decode worker");
    baton::testing::ExpectWorkerMetricSet(*text, model);
    EXPECT_EQ(baton::testing::MetricSum(*text, "baton_request_success_total"), transfers);
    EXPECT_EQ(baton::testing::MetricSum(*text, "baton_request_prompt_tokens_sum"), prompt_tokens);
    EXPECT_EQ(baton::testing::MetricSum(*text, "baton_request_queue_time_seconds_count"),
              transfers);
    EXPECT_EQ(baton::testing::MetricSum(*text, "baton_num_requests_running"), 0);
  }
  // The prefill side stops after its one token (max_tokens 1: "length").
  EXPECT_EQ(
      baton::testing::MetricSum(sent, "baton_request_success_total", R"(finished_reason="length")"),
      transfers);
  EXPECT_EQ(baton::testing::MetricSum(sent, "baton_request_generation_tokens_sum"), transfers);
  EXPECT_EQ(baton::testing::MetricSum(received, "baton_request_generation_tokens_sum"),
            generated_tokens);
  // The prefill worker computed every prompt token it did not hold cached, in its steps.
  EXPECT_GE(baton::testing::MetricSum(sent, "baton_iteration_tokens_sum"),
            prompt_tokens - baton::testing::MetricSum(sent, "baton_prefix_cache_hit_tokens_total"));
}

TEST_P(DisaggProcessTest, RefusalsAreCleanErrors) {
  Worker decode(BATON_DECODE_BIN, GetParam());
  Worker prefill(BATON_PREFILL_BIN, GetParam());
  ASSERT_TRUE(decode.stub && prefill.stub);
  pb::PrefillResponse pre;
  // A decode worker that is not there.
  grpc::Status s = Prefill(prefill, "127.0.0.1:1", Request("a", 20, 1, 4), &pre);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  // Roles: a decode worker does not prefill for others, a prefill worker does not take
  // transfers.
  s = Prefill(decode, prefill.target, Request("b", 20, 1, 4), &pre);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  Output o = Generate(prefill, Request("c", 20, 1, 4), "c");
  EXPECT_EQ(o.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  // A transfer nobody completed cannot be claimed.
  o = Generate(decode, Request("d", 20, 1, 4), "d");
  EXPECT_EQ(o.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(o.status.error_message().find("no completed KV transfer"), std::string::npos);
  // A prompt longer than the context is refused by the decode worker's Reserve.
  s = Prefill(prefill, decode.target, Request("e", 600, 1, 4), &pre);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_TRUE(NoPagesHeld(decode.WaitFor(NoPagesHeld, 5)));
  EXPECT_TRUE(NoPagesHeld(prefill.WaitFor(NoPagesHeld, 5)));
}

// A long prompt in one-token chunks: the transfer takes long enough to break it midway.
pb::GenerateRequest SlowRequest(const std::string& id) { return Request(id, 480, 2, 4); }
// The step delay keeps it slow where puts are fast (shared memory writes the decode
// worker's pool directly).
const std::vector<std::string> kSlow = {"--max-prefill-chunk",   "1", "--max-batched-tokens", "256",
                                        "--debug-step-delay-ms", "2"};

// One small transfer, so that the UCX endpoint between the two is open before a test kills
// one of them: connections are long-lived in a cluster, and Debian's UCX 1.13 aborts a
// process whose peer dies mid-handshake (openucx/ucx#8175; docs/disaggregation.md).
void WarmUp(Worker& prefill, Worker& decode) {
  const pb::GenerateRequest req = Request("warm-up", 20, 1, 2);
  pb::PrefillResponse pre;
  ASSERT_TRUE(Prefill(prefill, decode.target, req, &pre).ok());
  ASSERT_TRUE(Generate(decode, req, req.request_id()).status.ok());
}

// Runs a Prefill call on another thread.
struct AsyncPrefill {
  grpc::ClientContext ctx;
  pb::PrefillResponse out;
  grpc::Status status;
  std::thread thread;
  AsyncPrefill(Worker& prefill, const Worker& decode, const pb::GenerateRequest& req) {
    thread = std::thread([&, req] { status = Prefill(prefill, decode.target, req, &out, &ctx); });
  }
  ~AsyncPrefill() {
    if (thread.joinable()) thread.join();
  }
};

TEST_P(DisaggProcessTest, APrefillLongerThanTheLeaseKeepsItAlive) {
  Worker decode(BATON_DECODE_BIN, GetParam(), {"--kv-lease-seconds", "0.15"});
  Worker prefill(BATON_PREFILL_BIN, GetParam(), kSlow);
  ASSERT_TRUE(decode.stub && prefill.stub);
  const pb::GenerateRequest req = SlowRequest("long");
  const auto start = std::chrono::steady_clock::now();
  pb::PrefillResponse pre;
  grpc::Status s = Prefill(prefill, decode.target, req, &pre);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_GT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 0.3)
      << "the prompt must outlast two leases for this test to mean anything";
  const Output got = Generate(decode, req, req.request_id());
  ASSERT_TRUE(got.status.ok()) << got.status.error_message();
  EXPECT_EQ(got.ids.at(0), pre.first_token());
  EXPECT_TRUE(NoPagesHeld(decode.WaitFor(NoPagesHeld, 5)));
}

TEST_P(DisaggProcessTest, KilledPrefillWorkerLeavesNoPagesAfterTheLease) {
  Worker decode(BATON_DECODE_BIN, GetParam(), {"--kv-lease-seconds", "1"});
  Worker prefill(BATON_PREFILL_BIN, GetParam(), kSlow);
  ASSERT_TRUE(decode.stub && prefill.stub);
  WarmUp(prefill, decode);
  const pb::GetStatsResponse before = decode.WaitFor(NoPagesHeld, 5);
  AsyncPrefill call(prefill, decode, SlowRequest("k1"));
  const pb::GetStatsResponse reserved =
      decode.WaitFor([](const auto& s) { return s.kv_reservations() == 1; }, 20);
  ASSERT_EQ(reserved.kv_reservations(), 1);
  EXPECT_GT(reserved.pages_used(), 0);
  prefill.process->Signal(SIGKILL);
  call.thread.join();
  EXPECT_EQ(call.status.error_code(), grpc::StatusCode::UNAVAILABLE) << call.status.error_message();
  const pb::GetStatsResponse after = decode.WaitFor(NoPagesHeld, 10);
  EXPECT_TRUE(NoPagesHeld(after));
  EXPECT_EQ(after.pages_free(), before.pages_free());
  // The claim a router might still make fails cleanly.
  Output o = Generate(decode, SlowRequest("k1"), "k1");
  EXPECT_EQ(o.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_P(DisaggProcessTest, KilledDecodeWorkerFailsThePrefillCleanly) {
  Worker decode(BATON_DECODE_BIN, GetParam());
  Worker prefill(BATON_PREFILL_BIN, GetParam(), kSlow);
  ASSERT_TRUE(decode.stub && prefill.stub);
  WarmUp(prefill, decode);
  const pb::GetStatsResponse before = prefill.WaitFor(NoPagesHeld, 5);
  AsyncPrefill call(prefill, decode, SlowRequest("k2"));
  ASSERT_EQ(
      decode.WaitFor([](const auto& s) { return s.kv_reservations() == 1; }, 20).kv_reservations(),
      1);
  // The decode worker counts the reservation before its reply reaches the prefill worker; kill
  // it only once the prefill worker's engine holds the request, so the failure is the one under
  // test (mid-transfer) and not a lost Reserve reply, which never reaches the engine.
  const pb::GetStatsResponse held =
      prefill.WaitFor([](const auto& s) { return s.running() + s.waiting() == 1; }, 20);
  ASSERT_EQ(held.running() + held.waiting(), 1);
  const auto killed = std::chrono::steady_clock::now();
  decode.process->Signal(SIGKILL);
  call.thread.join();
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  EXPECT_EQ(call.status.error_code(), grpc::StatusCode::UNAVAILABLE) << call.status.error_message();
  EXPECT_LT(took, 15.0) << "the prefill ended by a deadline at worst, never hung";
  const pb::GetStatsResponse after = prefill.WaitFor(NoPagesHeld, 10);
  EXPECT_TRUE(NoPagesHeld(after));
  EXPECT_EQ(after.pages_free(), before.pages_free());
  EXPECT_EQ(after.requests_failed() + after.requests_cancelled(),
            before.requests_failed() + before.requests_cancelled() + 1);
}

TEST_P(DisaggProcessTest, ACancelledPrefillFreesBothSides) {
  Worker decode(BATON_DECODE_BIN, GetParam());
  Worker prefill(BATON_PREFILL_BIN, GetParam(), kSlow);
  ASSERT_TRUE(decode.stub && prefill.stub);
  WarmUp(prefill, decode);
  AsyncPrefill call(prefill, decode, SlowRequest("k3"));
  ASSERT_EQ(
      decode.WaitFor([](const auto& s) { return s.kv_reservations() == 1; }, 20).kv_reservations(),
      1);
  call.ctx.TryCancel();
  call.thread.join();
  EXPECT_EQ(call.status.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(NoPagesHeld(prefill.WaitFor(NoPagesHeld, 10)));
  EXPECT_TRUE(NoPagesHeld(decode.WaitFor(NoPagesHeld, 10))) << "released, not left to expire";
}

// A Generate that awaits its transfer (await_kv_transfer_ms, as the router opens the decode
// stream together with the Prefill), on another thread while the Prefill runs.
struct AwaitingGenerate {
  AwaitingGenerate(Worker& w, pb::GenerateRequest req, uint32_t wait_ms) {
    req.set_await_kv_transfer_ms(wait_ms);
    thread = std::thread([&w, req, this] { out = Generate(w, req, req.request_id(), &ctx); });
  }
  grpc::ClientContext ctx;
  Output out;
  std::thread thread;
};

TEST_P(DisaggProcessTest, ADecodeStreamOpenedBeforeThePrefillWaitsForItsTransfer) {
  Worker decode(BATON_DECODE_BIN, GetParam());
  Worker prefill(BATON_PREFILL_BIN, GetParam());
  ASSERT_TRUE(decode.stub && prefill.stub);
  auto loaded = engine::LoadModel(kModel);
  ASSERT_TRUE(loaded.ok());
  ThreadPool threads(1);
  for (uint64_t seed : {1, 2, 3, 4}) {
    const pb::GenerateRequest req = Request(StrCat("aw", seed), 40, seed, 10);
    // Seeds 1-3: the stream waits first. Seed 4: the transfer is complete before the
    // stream comes, which then claims it at once.
    const bool stream_first = seed != 4;
    std::optional<AwaitingGenerate> early;
    if (stream_first) {
      early.emplace(decode, req, 60000);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    pb::PrefillResponse pre;
    grpc::Status s = Prefill(prefill, decode.target, req, &pre);
    ASSERT_TRUE(s.ok()) << s.error_message();
    std::optional<AwaitingGenerate> late;
    if (!stream_first) late.emplace(decode, req, 60000);
    AwaitingGenerate& stream = stream_first ? *early : *late;
    stream.thread.join();
    ASSERT_TRUE(stream.out.status.ok()) << stream.out.status.error_message();
    auto request = FromProto(req);
    ASSERT_TRUE(request.ok());
    auto want =
        engine::Generate(*loaded, &threads, request->prompt_ids, request->params, {}, nullptr);
    ASSERT_TRUE(want.ok());
    EXPECT_EQ(stream.out.ids, want->output_ids) << "seed " << seed;
  }
  EXPECT_TRUE(NoPagesHeld(decode.WaitFor(NoPagesHeld, 5)));
  EXPECT_TRUE(NoPagesHeld(prefill.WaitFor(NoPagesHeld, 5)));
}

// A stream that waits for a transfer that never comes ends with the reason, at once, and
// holds nothing: its wait runs out, the transfer is released, or its caller cancels.
TEST_P(DisaggProcessTest, AnAwaitedTransferThatNeverComesEndsWithTheReason) {
  Worker decode(BATON_DECODE_BIN, GetParam());
  ASSERT_TRUE(decode.stub);
  const pb::GenerateRequest req = Request("never", 40, 1, 4);
  {
    AwaitingGenerate stream(decode, req, 300);
    stream.thread.join();
    EXPECT_EQ(stream.out.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
    EXPECT_NE(stream.out.status.error_message().find("await_kv_transfer_ms"), std::string::npos)
        << stream.out.status.error_message();
  }
  {
    AwaitingGenerate stream(decode, req, 60000);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto kv = pb::KvTransfer::NewStub(
        grpc::CreateChannel(decode.target, grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    pb::ReleaseRequest release;
    release.set_request_id(req.request_id());
    pb::ReleaseResponse released;
    ASSERT_TRUE(kv->Release(&ctx, release, &released).ok());
    stream.thread.join();
    EXPECT_EQ(stream.out.status.error_code(), grpc::StatusCode::ABORTED);
    EXPECT_NE(stream.out.status.error_message().find("released"), std::string::npos);
  }
  {
    AwaitingGenerate stream(decode, req, 60000);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    stream.ctx.TryCancel();
    stream.thread.join();
    EXPECT_EQ(stream.out.status.error_code(), grpc::StatusCode::CANCELLED);
  }
  {
    AwaitingGenerate stream(decode, req, 600001);
    stream.thread.join();
    EXPECT_EQ(stream.out.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(stream.out.status.error_message().find("await_kv_transfer_ms is 600001"),
              std::string::npos);
  }
  EXPECT_TRUE(NoPagesHeld(decode.WaitFor(NoPagesHeld, 5)));
}

// KV pages cross only between workers that hold the same element type
// (--kv-cache-dtype): a bf16 prefill worker and an f32 decode worker refuse each other
// before any page moves, saying which dtype each holds and which flag to set, and hold no
// pages after. f32 on both sides serves, with the tokens of the f32 single-sequence path.
TEST(DisaggKvDtypeTest, WorkersOfDifferentKvDtypesRefuseEachOther) {
  Worker decode(BATON_DECODE_BIN, "tcp", {"--kv-cache-dtype", "f32"});
  Worker prefill(BATON_PREFILL_BIN, "tcp");  // bf16, the default
  Worker prefill_f32(BATON_PREFILL_BIN, "tcp", {"--kv-cache-dtype", "f32"});
  ASSERT_TRUE(decode.stub && prefill.stub && prefill_f32.stub);
  const pb::GenerateRequest req = Request("mixed", 40, 2, 6);
  pb::PrefillResponse pre;
  grpc::Status s = Prefill(prefill, decode.target, req, &pre);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  // The decode worker checks the sender's layout against its own (the receiving side of
  // kvcache::CheckSliceCompatible): the prefill worker's bf16 is the source.
  EXPECT_NE(s.error_message().find("dtype bf16 (source) vs f32 (destination)"), std::string::npos)
      << s.error_message();
  EXPECT_NE(s.error_message().find("same --kv-cache-dtype"), std::string::npos)
      << s.error_message();
  EXPECT_TRUE(NoPagesHeld(decode.WaitFor(NoPagesHeld, 5)));
  EXPECT_TRUE(NoPagesHeld(prefill.WaitFor(NoPagesHeld, 5)));

  s = Prefill(prefill_f32, decode.target, req, &pre);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const Output got = Generate(decode, req, req.request_id());
  ASSERT_TRUE(got.status.ok()) << got.status.error_message();
  auto loaded = engine::LoadModel(kModel);
  ASSERT_TRUE(loaded.ok());
  ThreadPool threads(1);
  auto request = FromProto(req);
  ASSERT_TRUE(request.ok());
  engine::GenerateOptions f32;
  f32.kv_cache_dtype = "f32";
  auto want =
      engine::Generate(*loaded, &threads, request->prompt_ids, request->params, f32, nullptr);
  ASSERT_TRUE(want.ok());
  EXPECT_EQ(got.ids, want->output_ids);
}

INSTANTIATE_TEST_SUITE_P(Transports, DisaggProcessTest, ::testing::Values("tcp", "sm"),
                         [](const ::testing::TestParamInfo<const char*>& p) {
                           return std::string(p.param);
                         });

}  // namespace
}  // namespace baton::worker
