// Generation against a fake worker on loopback gRPC: the router's side of a request —
// incremental detokenization, stop strings (which cancel the sequence in the worker),
// stop tokens, n choices, errors and cancellation. The fake scripts the worker's token
// ids; the tokenizer is the bundled model's.
#include "dispatch/generation.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/fakes/fake_worker.h"
#include "tokenizer/loader.h"

namespace baton::dispatch {
namespace {

namespace pb = ::baton::internal::v1;

const std::string kModel = std::string(BATON_SOURCE_DIR) + "/models/baton-tiny";

class GenerationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto files = tokenizer::LoadTokenizerFiles(kModel);
    ASSERT_TRUE(files.ok()) << files.status();
    tokenizer_ = files->tokenizer;
    client_ = std::make_unique<WorkerClient>(server_.target());
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

  struct Collected {
    std::vector<std::string> text;  // per choice
    std::vector<ChoiceDelta> last;
    absl::Status status;
  };
  Collected Run(GenerationRequest r) {
    Collected c;
    c.text.resize(r.n);
    c.last.resize(r.n);
    auto gen = Generation::Start(loops_.get(), client_.get(), tokenizer_, std::move(r));
    EXPECT_TRUE(gen.ok()) << gen.status();
    if (!gen.ok()) return c;
    ChoiceDelta d;
    while ((*gen)->Next(&d)) {
      c.text[d.index] += d.text;
      if (d.finished) c.last[d.index] = d;
    }
    c.status = (*gen)->status();
    return c;
  }

  fakes::FakeWorkerServer server_;
  fakes::FakeWorker& fake_ = server_.worker;
  fakes::FakeKvTransfer& kv_ = server_.kv;
  std::unique_ptr<WorkerClient> client_;
  // Two queues: a test's generations run on either.
  std::unique_ptr<CompletionLoops> loops_ = CompletionLoops::Create(2);
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer_;
};

TEST_F(GenerationTest, TextIsTheDecodeOfAllTokens) {
  fake_.script = Encode(" there was a little girl named Lily. She liked to play.");
  Collected c = Run(Request());
  ASSERT_TRUE(c.status.ok()) << c.status;
  EXPECT_EQ(c.text[0], tokenizer_->Decode(fake_.script).value());
  EXPECT_EQ(c.last[0].finish_reason, "length");
  EXPECT_EQ(c.last[0].completion_tokens, static_cast<int64_t>(fake_.script.size()));
  EXPECT_EQ(c.last[0].cached_tokens, 16);
  ASSERT_EQ(fake_.requests.size(), 1u);
  EXPECT_EQ(fake_.requests[0].request_id(), "req");
  EXPECT_FALSE(fake_.requests[0].detokenize());  // token ids only cross the wire
}

TEST_F(GenerationTest, StopStringSplitAcrossTokensEndsTheChoiceAndCancelsTheWorker) {
  fake_.script = Encode(" there was a little girl named Lily. She liked to play.");
  fake_.hang = true;  // the worker would go on for ever
  GenerationRequest r = Request();
  r.stop = {"girl na"};  // spans " girl" and " named"
  Collected c = Run(std::move(r));
  ASSERT_TRUE(c.status.ok()) << c.status;
  EXPECT_EQ(c.text[0], " there was a little ");
  EXPECT_EQ(c.last[0].finish_reason, "stop");
  EXPECT_EQ(c.last[0].stop_reason, "girl na");
  // Tokens up to the one that completed the match: " there was a little girl named".
  EXPECT_EQ(c.last[0].completion_tokens,
            static_cast<int64_t>(Encode(" there was a little girl named").size()));
  EXPECT_EQ(c.last[0].cached_tokens, 16);  // from the worker's first message
  for (int i = 0; i < 500 && fake_.cancelled.load() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(fake_.cancelled.load(), 1);
}

TEST_F(GenerationTest, IncludeStopStringKeepsIt) {
  fake_.script = Encode(" there was a little girl named Lily.");
  GenerationRequest r = Request();
  r.stop = {"little"};
  r.include_stop_str_in_output = true;
  Collected c = Run(std::move(r));
  ASSERT_TRUE(c.status.ok()) << c.status;
  EXPECT_EQ(c.text[0], " there was a little");
}

TEST_F(GenerationTest, FinalStopTokenIsCountedButNotText) {
  fake_.script = Encode(" the end");
  fake_.script.push_back(2);  // EOS of baton-tiny, which ends the worker's stream
  fake_.finish_reason = "stop";
  Collected c = Run(Request());
  ASSERT_TRUE(c.status.ok()) << c.status;
  EXPECT_EQ(c.text[0], " the end");
  EXPECT_EQ(c.last[0].finish_reason, "stop");
  EXPECT_EQ(c.last[0].completion_tokens, static_cast<int64_t>(fake_.script.size()));
}

TEST_F(GenerationTest, ChoicesRunAsSeparateSequencesWithTheirOwnSeeds) {
  fake_.script = Encode(" a dog");
  GenerationRequest r = Request();
  r.n = 3;
  r.params.set_seed(41);
  Collected c = Run(std::move(r));
  ASSERT_TRUE(c.status.ok()) << c.status;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(c.text[i], " a dog") << i;
  ASSERT_EQ(fake_.requests.size(), 3u);
  std::vector<std::string> ids;
  std::vector<uint64_t> seeds;
  for (const auto& req : fake_.requests) {
    ids.push_back(req.request_id());
    seeds.push_back(req.params().seed());
  }
  std::sort(ids.begin(), ids.end());
  std::sort(seeds.begin(), seeds.end());
  EXPECT_EQ(ids, (std::vector<std::string>{"req-0", "req-1", "req-2"}));
  EXPECT_EQ(seeds, (std::vector<uint64_t>{41, 42, 43}));
}

// Push mode is what the HTTP stream uses: the same deltas, never two callbacks at once,
// and on_done exactly once, after the last delta.
TEST_F(GenerationTest, PushModeDeliversTheSameDeltasThenDoneOnce) {
  fake_.script = Encode(" there was a little girl named Lily. She liked to play.");
  GenerationRequest r = Request();
  r.n = 3;
  r.stop = {"Lily"};
  Collected pulled = Run(r);
  ASSERT_TRUE(pulled.status.ok()) << pulled.status;

  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> text(3);
  std::vector<int> finals(3, 0);
  std::atomic<int> in_callback{0};
  std::atomic<bool> overlapped{false};
  int done_calls = 0;
  bool delta_after_done = false;
  absl::Status done_status;
  GenerationCallbacks callbacks;
  callbacks.on_delta = [&](const ChoiceDelta& d) {
    if (in_callback.fetch_add(1) != 0) overlapped = true;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (done_calls > 0) delta_after_done = true;
      text[d.index] += d.text;
      if (d.finished) ++finals[d.index];
    }
    in_callback.fetch_sub(1);
  };
  callbacks.on_done = [&](const absl::Status& s) {
    std::lock_guard<std::mutex> lock(mu);
    ++done_calls;
    done_status = s;
    cv.notify_all();
  };
  auto gen = Generation::Start(loops_.get(), client_.get(), tokenizer_, r, callbacks);
  ASSERT_TRUE(gen.ok()) << gen.status();
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return done_calls > 0; }));
  }
  gen->reset();  // waits for on_done to return
  EXPECT_EQ(done_calls, 1);
  EXPECT_TRUE(done_status.ok()) << done_status;
  EXPECT_FALSE(delta_after_done);
  EXPECT_FALSE(overlapped.load());
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(text[i], pulled.text[i]) << i;
    EXPECT_EQ(text[i], " there was a little girl named ") << i;
    EXPECT_EQ(finals[i], 1) << i;
  }
}

TEST_F(GenerationTest, WorkerErrorKeepsItsCodeAndMessage) {
  fake_.fail = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "the queue is full (4096)");
  Collected c = Run(Request());
  EXPECT_EQ(c.status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(c.status.message(), "the queue is full (4096)");
}

TEST_F(GenerationTest, WorkerDownIsUnavailableNamingTheWorker) {
  server_.Shutdown();
  Collected c = Run(Request());
  EXPECT_EQ(c.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(c.status.message().find(client_->target()), std::string::npos) << c.status;
}

// Several choices share their worker, so they leave an unreachable one together: all
// start over, once, on another (the front doors' reroute for n > 1).
class GenerationStartOverTest : public GenerationTest {
 protected:
  void SetUp() override {
    GenerationTest::SetUp();
    for (auto* w : {&server_, &other_}) w->worker.script = Encode(" there was a little girl.");
    PoolOptions o;
    o.policy = "round_robin";
    // Off: these tests are about Generation's start-over, not a stream's migration
    // (request_run_test.cc), which would move each choice by itself.
    o.migration_limit = 0;
    auto pool = WorkerPool::Create(server_.target() + "," + other_.target(), "", "", o);
    ASSERT_TRUE(pool.ok()) << pool.status();
    pool_ = *std::move(pool);
  }

  // Runs `r` on the pool's next route; `picked` is the server it named.
  Collected RunOnPool(GenerationRequest r, fakes::FakeWorkerServer** picked,
                      std::unique_ptr<Generation>* kept) {
    Route route = *pool_->Pick(r.prompt_ids, "");
    *picked = route.decode->target() == server_.target() ? &server_ : &other_;
    if (on_pick_) on_pick_(**picked);
    Collected c;
    c.text.resize(r.n);
    c.last.resize(r.n);
    auto gen = Generation::Start(loops_.get(), std::move(route), tokenizer_, std::move(r));
    EXPECT_TRUE(gen.ok()) << gen.status();
    if (!gen.ok()) return c;
    ChoiceDelta d;
    while ((*gen)->Next(&d)) c.text[d.index] += d.text;
    c.status = (*gen)->status();
    *kept = *std::move(gen);
    return c;
  }

  fakes::FakeWorkerServer other_;
  std::unique_ptr<WorkerPool> pool_;
  std::function<void(fakes::FakeWorkerServer&)> on_pick_;
};

TEST_F(GenerationStartOverTest, AllChoicesMoveFromAnUnreachableWorker) {
  on_pick_ = [](fakes::FakeWorkerServer& s) { s.Shutdown(); };
  GenerationRequest r = Request();
  r.n = 3;
  fakes::FakeWorkerServer* down = nullptr;
  std::unique_ptr<Generation> gen;
  Collected c = RunOnPool(std::move(r), &down, &gen);
  ASSERT_TRUE(c.status.ok()) << c.status;
  fakes::FakeWorkerServer& up = down == &server_ ? other_ : server_;
  EXPECT_TRUE(gen->rerouted());
  EXPECT_EQ(gen->route().decode->target(), up.target());
  EXPECT_EQ(up.worker.generates.load(), 3);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(c.text[i], " there was a little girl.") << i;
}

TEST_F(GenerationStartOverTest, NoStartOverOnceAChoiceDeliveredOrForOneChoice) {
  // The worker sends one token, then goes away: the client has seen text.
  on_pick_ = [](fakes::FakeWorkerServer& s) {
    s.worker.fail_after = 1;
    s.worker.fail_after_status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "went away");
  };
  GenerationRequest r = Request();
  r.n = 2;
  fakes::FakeWorkerServer* serving = nullptr;
  std::unique_ptr<Generation> gen;
  Collected c = RunOnPool(std::move(r), &serving, &gen);
  EXPECT_EQ(c.status.code(), absl::StatusCode::kUnavailable) << c.status;
  EXPECT_FALSE(gen->rerouted());
  fakes::FakeWorkerServer& idle = serving == &server_ ? other_ : server_;
  EXPECT_EQ(idle.worker.generates.load(), 0);
}

TEST_F(GenerationStartOverTest, CancelledChoicesDoNotStartOver) {
  // Cancelled before the worker sent anything: nothing delivered, yet the caller asked to
  // stop.
  on_pick_ = [](fakes::FakeWorkerServer& s) {
    s.worker.script.clear();
    s.worker.hang = true;
  };
  GenerationRequest r = Request();
  r.n = 2;
  Route route = *pool_->Pick(r.prompt_ids, "");
  fakes::FakeWorkerServer& picked = route.decode->target() == server_.target() ? server_ : other_;
  fakes::FakeWorkerServer& idle = &picked == &server_ ? other_ : server_;
  on_pick_(picked);
  auto gen = Generation::Start(loops_.get(), std::move(route), tokenizer_, std::move(r));
  ASSERT_TRUE(gen.ok()) << gen.status();
  ASSERT_EQ(fakes::FakeWorker::WaitFor(picked.worker.generates, 2), 2);
  (*gen)->Cancel();
  ChoiceDelta d;
  while ((*gen)->Next(&d)) {
  }
  EXPECT_EQ((*gen)->status().code(), absl::StatusCode::kCancelled) << (*gen)->status();
  EXPECT_FALSE((*gen)->rerouted());
  EXPECT_EQ(idle.worker.generates.load(), 0);
}

TEST_F(GenerationTest, CancelStopsTheWorkerAndEndsWithCancelled) {
  fake_.script = Encode(" there");
  fake_.hang = true;
  auto gen = Generation::Start(loops_.get(), client_.get(), tokenizer_, Request());
  ASSERT_TRUE(gen.ok());
  ChoiceDelta d;
  ASSERT_TRUE((*gen)->Next(&d));
  EXPECT_EQ(d.text, " there");
  std::thread canceller([&] { (*gen)->Cancel(); });
  EXPECT_FALSE((*gen)->Next(&d));
  canceller.join();
  EXPECT_EQ((*gen)->status().code(), absl::StatusCode::kCancelled);
  for (int i = 0; i < 500 && fake_.cancelled.load() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(fake_.cancelled.load(), 1);
}

TEST_F(GenerationTest, DestroyingAnOpenGenerationCancelsIt) {
  fake_.script = Encode(" there");
  fake_.hang = true;
  {
    auto gen = Generation::Start(loops_.get(), client_.get(), tokenizer_, Request());
    ASSERT_TRUE(gen.ok());
    ChoiceDelta d;
    ASSERT_TRUE((*gen)->Next(&d));
  }
  for (int i = 0; i < 500 && fake_.cancelled.load() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(fake_.cancelled.load(), 1);
}

// A split route whose decode stream never delivered: the router gives the decode worker's
// reservation back at once instead of leaving it to the lease.
TEST_F(GenerationTest, SplitLegThatFailsBeforeDecodingReleasesTheReservation) {
  fake_.script = Encode(" there");
  fake_.fail = grpc::Status(grpc::StatusCode::INTERNAL, "decode broke");
  Route route(client_.get());
  route.prefill = client_.get();
  auto gen = Generation::Start(loops_.get(), route, tokenizer_, Request());
  ASSERT_TRUE(gen.ok());
  ChoiceDelta d;
  EXPECT_FALSE((*gen)->Next(&d));
  EXPECT_EQ((*gen)->status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(fake_.prefills.load(), 1);
  EXPECT_EQ(kv_.WaitForRelease(10), std::vector<std::string>{"req#p0"});
}

TEST_F(GenerationTest, SplitLegCancelledDuringPrefillReleasesTheReservation) {
  fake_.prefill_hang = true;
  Route route(client_.get());
  route.prefill = client_.get();
  auto gen = Generation::Start(loops_.get(), route, tokenizer_, Request());
  ASSERT_TRUE(gen.ok());
  for (int i = 0; i < 500 && fake_.prefills.load() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  (*gen)->Cancel();
  ChoiceDelta d;
  EXPECT_FALSE((*gen)->Next(&d));
  EXPECT_EQ((*gen)->status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(kv_.WaitForRelease(10), std::vector<std::string>{"req#p0"});
  // The decode stream, opened with the Prefill to await the transfer, delivered nothing.
  EXPECT_FALSE((*gen)->Next(&d));
}

// A colocated request has no reservation to give back.
TEST_F(GenerationTest, ColocatedFailureReleasesNothing) {
  fake_.fail = grpc::Status(grpc::StatusCode::INTERNAL, "broke");
  EXPECT_EQ(Run(Request()).status.code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(kv_.WaitForRelease(1).empty());
}

TEST_F(GenerationTest, RejectsStopStringsInWorkerParams) {
  GenerationRequest r = Request();
  r.params.add_stop("x");
  EXPECT_EQ(
      Generation::Start(loops_.get(), client_.get(), tokenizer_, std::move(r)).status().code(),
      absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace baton::dispatch
