// RequestRun, the one sequencing of a request across workers, against fake workers on
// loopback gRPC (tests/fakes/fake_worker.h): every way a run can end. The prefill leg
// (ok, retried elsewhere, computed locally, refused), the decode stream (fails before and
// after its first token), cancel in each phase, the reroute after an unreachable worker,
// and the release of a reservation that no decode stream claimed.
#include "dispatch/request_run.h"

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/fakes/fake_worker.h"
#include "tokenizer/loader.h"

namespace baton::dispatch {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kModel = std::string(BATON_SOURCE_DIR) + "/models/baton-tiny";

struct Outcome {
  std::string text;
  int deltas = 0;
  ChoiceDelta last;
  absl::Status status;
  bool rerouted = false;
  int migrations = 0;
  std::string served_by;  // the route's decode worker at the end
};

class RequestRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto files = tokenizer::LoadTokenizerFiles(kModel);
    ASSERT_TRUE(files.ok()) << files.status();
    tokenizer_ = files->tokenizer;
    script_ = Encode(" there was a little girl named Lily.");
    for (auto* w : {&a_, &b_, &c_}) w->worker.script = script_;
  }

  std::vector<int32_t> Encode(const std::string& text) {
    return tokenizer_->Encode(text, {.add_special_tokens = false}).value();
  }

  GenerationRequest Request() {
    GenerationRequest r;
    r.request_id = "req";
    r.prompt_ids = Encode("Once upon a time");
    r.params.set_max_tokens(64);
    return r;
  }

  // A pool over the fakes: `colocated`, `prefill` and `decode` list fakes by name.
  std::unique_ptr<WorkerPool> Pool(const std::string& colocated, const std::string& prefill,
                                   const std::string& decode, PoolOptions o = {}) {
    o.policy = "round_robin";
    auto pool = WorkerPool::Create(Targets(colocated), Targets(prefill), Targets(decode), o);
    EXPECT_TRUE(pool.ok()) << pool.status();
    return pool.ok() ? *std::move(pool) : nullptr;
  }
  std::string Targets(const std::string& names) {
    std::string out;
    for (char n : names) {
      if (!out.empty()) out += ",";
      out += Fake(n).target();
    }
    return out;
  }
  fakes::FakeWorkerServer& Fake(char name) { return name == 'a' ? a_ : name == 'b' ? b_ : c_; }
  fakes::FakeWorkerServer& ServerOf(const WorkerClient* w) {
    return w->target() == a_.target() ? a_ : w->target() == b_.target() ? b_ : c_;
  }

  // Runs one sequence on `route`; `during(run, deltas so far)` runs on the test's thread
  // after the run started (and once more per delta, when `per_delta`).
  Outcome Run(Route route, GenerationRequest r, RunOptions options = {},
              const std::function<void(RequestRun&)>& after_start = nullptr,
              const std::function<void(RequestRun&)>& after_first_delta = nullptr) {
    Outcome out;
    std::promise<void> done;
    std::promise<void> first;
    bool first_set = false;
    auto wire = WorkerRequest(r, 0);
    EXPECT_TRUE(wire.ok()) << wire.status();
    std::unique_ptr<RequestRun> run =
        RequestRun::Start(loops_->Pick(), std::move(route), *std::move(wire),
                          ChoiceDecoder(0, tokenizer_, r), options,
                          {.on_delta =
                               [&](const ChoiceDelta& d) {
                                 out.text += d.text;
                                 ++out.deltas;
                                 if (d.finished) out.last = d;
                                 if (!first_set) {
                                   first_set = true;
                                   first.set_value();
                                 }
                               },
                           .on_done =
                               [&](const absl::Status& s) {
                                 out.status = s;
                                 done.set_value();
                               }});
    if (after_start) after_start(*run);
    if (after_first_delta &&
        first.get_future().wait_for(std::chrono::seconds(10)) == std::future_status::ready) {
      after_first_delta(*run);
    }
    EXPECT_EQ(done.get_future().wait_for(std::chrono::seconds(20)), std::future_status::ready);
    out.rerouted = run->rerouted();
    out.migrations = run->migrations();
    out.served_by = run->route().decode->target();
    return out;
  }

  fakes::FakeWorkerServer a_, b_, c_;
  std::vector<int32_t> script_;
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer_;
  std::unique_ptr<CompletionLoops> loops_ = CompletionLoops::Create(1);
};

TEST_F(RequestRunTest, ColocatedRunStreamsTheWorkersTokensAsText) {
  WorkerClient worker(a_.target());
  Outcome o = Run(Route(&worker), Request());
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_EQ(o.text, tokenizer_->Decode(script_).value());
  EXPECT_EQ(o.last.finish_reason, "length");
  EXPECT_EQ(a_.worker.prefills.load(), 0);
  EXPECT_TRUE(a_.kv.WaitForRelease(1).empty()) << "a colocated run reserves nothing";
}

TEST_F(RequestRunTest, SplitRunPrefillsThenDecodesWithTheTransferAndOneSeed) {
  auto pool = Pool("", "a", "b");
  Outcome o = Run(*pool->Pick(Request().prompt_ids, ""), Request());
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_EQ(o.text, tokenizer_->Decode(script_).value());
  std::lock_guard<std::mutex> pl(a_.worker.mu);
  std::lock_guard<std::mutex> dl(b_.worker.mu);
  ASSERT_EQ(a_.worker.prefill_requests.size(), 1u);
  ASSERT_EQ(b_.worker.requests.size(), 1u);
  const auto& prefill = a_.worker.prefill_requests[0];
  const auto& decode = b_.worker.requests[0];
  EXPECT_EQ(prefill.decode_worker(), b_.target());
  EXPECT_EQ(prefill.request().request_id(), "req#p0");
  EXPECT_EQ(decode.kv_transfer_id(), "req#p0");
  EXPECT_GT(decode.await_kv_transfer_ms(), 0u) << "opened before the transfer completed";
  EXPECT_EQ(prefill.request().kv_transfer_id(), "") << "the prefill worker awaits nothing";
  ASSERT_TRUE(decode.params().has_seed());
  EXPECT_EQ(decode.params().seed(), prefill.request().params().seed());
  EXPECT_GT(o.last.prefill.seconds, 0);
  EXPECT_TRUE(b_.kv.WaitForRelease(1).empty()) << "the decode stream claimed it";
}

// --no-decode-with-prefill: the decode stream opens once the Prefill answered, and awaits
// nothing (a decode worker older than await_kv_transfer_ms would refuse to wait).
TEST_F(RequestRunTest, WithoutDecodeWithPrefillTheStreamFollowsThePrefillsReply) {
  PoolOptions o;
  o.decode_with_prefill = false;
  auto pool = Pool("", "a", "b", o);
  a_.worker.prefill_hang = true;
  Outcome cancelled =
      Run(*pool->Pick(Request().prompt_ids, ""), Request(), {}, [&](RequestRun& run) {
        ASSERT_EQ(fakes::FakeWorker::WaitFor(a_.worker.prefills, 1), 1);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        EXPECT_EQ(b_.worker.generates.load(), 0) << "no stream before the Prefill's reply";
        run.Cancel();
      });
  EXPECT_EQ(cancelled.status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(b_.worker.generates.load(), 0);

  a_.worker.prefill_hang = false;
  Outcome o2 = Run(*pool->Pick(Request().prompt_ids, ""), Request());
  ASSERT_TRUE(o2.status.ok()) << o2.status;
  EXPECT_EQ(o2.text, tokenizer_->Decode(script_).value());
  std::lock_guard<std::mutex> lock(b_.worker.mu);
  ASSERT_EQ(b_.worker.requests.size(), 1u);
  EXPECT_EQ(b_.worker.requests[0].kv_transfer_id(), "req#p0");
  EXPECT_EQ(b_.worker.requests[0].await_kv_transfer_ms(), 0u);
}

TEST_F(RequestRunTest, FailedPrefillIsRetriedOnTheOtherPrefillWorker) {
  auto pool = Pool("", "ac", "b");
  Route route = *pool->Pick(Request().prompt_ids, "");
  fakes::FakeWorkerServer& first = ServerOf(route.prefill);
  fakes::FakeWorkerServer& other = &first == &a_ ? c_ : a_;
  first.worker.prefill_fail = grpc::Status(grpc::StatusCode::INTERNAL, "transfer broke");
  Outcome o = Run(std::move(route), Request());
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_EQ(first.worker.prefills.load(), 1);
  EXPECT_EQ(other.worker.prefills.load(), 1);
  std::lock_guard<std::mutex> lock(b_.worker.mu);
  // Each attempt opened its decode stream with its Prefill; the first one's was abandoned
  // (and cancelled so soon that the worker may never have seen it).
  ASSERT_GE(b_.worker.requests.size(), 1u);
  EXPECT_EQ(b_.worker.requests.back().kv_transfer_id(), "req#p1");
  // The failed attempt's reservation is given back; the second one was claimed.
  EXPECT_THAT(b_.kv.WaitForRelease(10), ElementsAre("req#p0"));
}

TEST_F(RequestRunTest, FailedPrefillWithNoOtherWorkerIsComputedOnTheDecodeWorker) {
  auto pool = Pool("", "a", "b");
  a_.worker.prefill_fail = grpc::Status(grpc::StatusCode::UNAVAILABLE, "gone");
  Outcome o = Run(*pool->Pick(Request().prompt_ids, ""), Request());
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_EQ(o.text, tokenizer_->Decode(script_).value());
  std::lock_guard<std::mutex> lock(b_.worker.mu);
  ASSERT_GE(b_.worker.requests.size(), 1u) << "the awaiting stream (maybe), then the local one";
  EXPECT_EQ(b_.worker.requests.back().kv_transfer_id(), "") << "no transfer to wait for";
  EXPECT_EQ(b_.worker.requests.back().await_kv_transfer_ms(), 0u);
}

TEST_F(RequestRunTest, RefusedPrefillFailsTheRunWithTheWorkersStatus) {
  auto pool = Pool("", "ac", "b");
  for (auto* w : {&a_, &c_}) {
    w->worker.prefill_fail = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "prompt too long");
  }
  Outcome o = Run(*pool->Pick(Request().prompt_ids, ""), Request());
  EXPECT_EQ(o.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(o.status.message(), "prompt too long");
  EXPECT_EQ(a_.worker.prefills.load() + c_.worker.prefills.load(), 1) << "not retried";
  EXPECT_LE(b_.worker.generates.load(), 1) << "the stream opened with the Prefill, only";
  EXPECT_EQ(o.deltas, 0);
  EXPECT_THAT(b_.kv.WaitForRelease(10), ElementsAre("req#p0"));
}

TEST_F(RequestRunTest, FailoverNoneFailsTheRunWhenThePrefillWorkerIsDown) {
  PoolOptions o;
  o.failover = PrefillFailover::kNone;
  auto pool = Pool("", "a", "b", o);
  a_.Shutdown();
  Outcome out = Run(*pool->Pick(Request().prompt_ids, ""), Request());
  EXPECT_EQ(out.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(out.status.message(), HasSubstr(a_.target()));
  EXPECT_EQ(out.deltas, 0);
}

TEST_F(RequestRunTest, DecodeFailureBeforeTheFirstTokenReleasesTheReservation) {
  auto pool = Pool("", "a", "b");
  b_.worker.fail = grpc::Status(grpc::StatusCode::INTERNAL, "decode broke");
  Outcome o = Run(*pool->Pick(Request().prompt_ids, ""), Request());
  EXPECT_EQ(o.status.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(o.status.message(), "decode broke");
  EXPECT_EQ(o.deltas, 0);
  EXPECT_THAT(b_.kv.WaitForRelease(10), ElementsAre("req#p0"));
}

TEST_F(RequestRunTest, DecodeFailureAfterTheFirstTokenEndsTheRunAfterItsText) {
  auto pool = Pool("", "a", "b");
  b_.worker.fail_after = 1;
  Outcome o = Run(*pool->Pick(Request().prompt_ids, ""), Request());
  EXPECT_EQ(o.status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(o.status.message(), HasSubstr("mid-stream"));
  EXPECT_EQ(o.deltas, 1);
  EXPECT_EQ(o.text, tokenizer_->Decode(std::vector<int32_t>{script_[0]}).value());
  EXPECT_TRUE(b_.kv.WaitForRelease(1).empty()) << "the decode worker had claimed it";
}

TEST_F(RequestRunTest, CancelDuringThePrefillEndsCancelledAndReleases) {
  auto pool = Pool("", "a", "b");
  a_.worker.prefill_hang = true;
  Outcome o = Run(*pool->Pick(Request().prompt_ids, ""), Request(), {}, [&](RequestRun& run) {
    ASSERT_EQ(fakes::FakeWorker::WaitFor(a_.worker.prefills, 1), 1);
    run.Cancel();
  });
  EXPECT_EQ(o.status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(o.deltas, 0);
  EXPECT_THAT(b_.kv.WaitForRelease(10), ElementsAre("req#p0"));
}

// Time to first token carries no router round trip after the prefill's reply: the decode
// stream is open, waiting for the transfer, while the Prefill call still runs.
TEST_F(RequestRunTest, TheDecodeStreamOpensWhileThePrefillRuns) {
  auto pool = Pool("", "a", "b");
  a_.worker.prefill_hang = true;
  Outcome o = Run(*pool->Pick(Request().prompt_ids, ""), Request(), {}, [&](RequestRun& run) {
    // The Prefill call never returns, so seeing both calls on their workers shows the
    // decode stream did not wait for it. Either may reach its server first.
    EXPECT_EQ(fakes::FakeWorker::WaitFor(b_.worker.generates, 1), 1);
    EXPECT_EQ(fakes::FakeWorker::WaitFor(a_.worker.prefills, 1), 1);
    run.Cancel();
  });
  EXPECT_EQ(o.status.code(), absl::StatusCode::kCancelled);
}

TEST_F(RequestRunTest, CancelDuringTheDecodeStreamStopsTheWorker) {
  auto pool = Pool("", "a", "b");
  b_.worker.hang = true;
  Outcome o = Run(*pool->Pick(Request().prompt_ids, ""), Request(), {}, nullptr,
                  [](RequestRun& run) { run.Cancel(); });
  EXPECT_EQ(o.status.code(), absl::StatusCode::kCancelled);
  EXPECT_GE(o.deltas, 1);
  EXPECT_EQ(fakes::FakeWorker::WaitFor(b_.worker.cancelled, 1), 1);
}

TEST_F(RequestRunTest, CancelBeforeAnyCallStartsNothingOnTheWorker) {
  WorkerClient worker(a_.target());
  Outcome o = Run(Route(&worker), Request(), {}, [](RequestRun& run) { run.Cancel(); });
  EXPECT_EQ(o.status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(o.deltas, 0);
}

TEST_F(RequestRunTest, AnUnreachableWorkerIsReroutedOnceToAnother) {
  auto pool = Pool("ab", "", "");
  Route route = *pool->Pick(Request().prompt_ids, "");
  fakes::FakeWorkerServer& down = ServerOf(route.decode);
  fakes::FakeWorkerServer& other = &down == &a_ ? b_ : a_;
  down.Shutdown();
  Outcome o = Run(std::move(route), Request());
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_TRUE(o.rerouted);
  EXPECT_EQ(o.served_by, other.target());
  EXPECT_EQ(o.text, tokenizer_->Decode(script_).value());
}

// Migration (RequestRun::Migrate): a stream that breaks UNAVAILABLE after it began goes on
// on another worker, which gets the prompt and the tokens so far (output_ids), under a new
// request id, with the same seed; the client sees one stream.
TEST_F(RequestRunTest, AStreamThatBreaksMidwayMovesToAnotherWorkerWithItsTokens) {
  auto pool = Pool("ab", "", "");
  Route route = *pool->Pick(Request().prompt_ids, "");
  fakes::FakeWorkerServer& serving = ServerOf(route.decode);
  fakes::FakeWorkerServer& other = &serving == &a_ ? b_ : a_;
  serving.worker.fail_after = 3;
  serving.worker.fail_after_status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "went away");
  // The fake streams its script as given: the rest of the sequence, as a real worker would.
  other.worker.script.assign(script_.begin() + 3, script_.end());
  Outcome o = Run(std::move(route), Request());
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_EQ(o.text, tokenizer_->Decode(script_).value());
  EXPECT_EQ(o.served_by, other.target());
  EXPECT_EQ(o.migrations, 1);
  EXPECT_EQ(o.last.completion_tokens, static_cast<int64_t>(script_.size()));
  ASSERT_EQ(serving.worker.requests.size(), 1u);
  ASSERT_EQ(other.worker.requests.size(), 1u);
  const auto& first = serving.worker.requests[0];
  const auto& moved = other.worker.requests[0];
  EXPECT_EQ(std::vector<int32_t>(moved.output_ids().begin(), moved.output_ids().end()),
            std::vector<int32_t>(script_.begin(), script_.begin() + 3));
  EXPECT_EQ(std::vector<int32_t>(moved.prompt_ids().begin(), moved.prompt_ids().end()),
            Request().prompt_ids);
  ASSERT_TRUE(first.params().has_seed()) << "the router seeds what it may migrate";
  EXPECT_EQ(moved.params().seed(), first.params().seed());
  EXPECT_EQ(moved.request_id(), first.request_id() + "~m1");
  EXPECT_TRUE(moved.kv_transfer_id().empty());
}

TEST_F(RequestRunTest, NoRerouteOnceTheWorkerSentATokenOrWhenNotAllowed) {
  PoolOptions no_migration;
  no_migration.migration_limit = 0;
  auto pool = Pool("ab", "", "", no_migration);
  Route route = *pool->Pick(Request().prompt_ids, "");
  fakes::FakeWorkerServer& serving = ServerOf(route.decode);
  fakes::FakeWorkerServer& other = &serving == &a_ ? b_ : a_;
  serving.worker.fail_after = 1;
  serving.worker.fail_after_status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "went away");
  Outcome o = Run(std::move(route), Request());
  EXPECT_EQ(o.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(o.rerouted);
  EXPECT_EQ(other.worker.generates.load(), 0);

  // One choice of several (may_reroute off) stays where it is.
  Route again = *pool->Pick(Request().prompt_ids, "");
  ServerOf(again.decode).Shutdown();
  RunOptions one_of_several;
  one_of_several.may_reroute = false;
  Outcome stay = Run(std::move(again), Request(), one_of_several);
  EXPECT_EQ(stay.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(stay.rerouted);
}

TEST_F(RequestRunTest, StopStringEndsTheRunAndCancelsTheWorker) {
  WorkerClient worker(a_.target());
  a_.worker.hang = true;
  GenerationRequest r = Request();
  r.stop = {"girl na"};
  Outcome o = Run(Route(&worker), r);
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_EQ(o.text, " there was a little ");
  EXPECT_EQ(o.last.finish_reason, "stop");
  EXPECT_EQ(fakes::FakeWorker::WaitFor(a_.worker.cancelled, 1), 1);
}

}  // namespace
}  // namespace baton::dispatch
