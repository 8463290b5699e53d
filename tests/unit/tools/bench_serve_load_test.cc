#include "tools/bench_serve_load.h"

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/bench_serve_stats.h"

namespace baton::tools {
namespace {

struct GapStats {
  double mean = 0;
  double variance = 0;
};

GapStats Gaps(const std::vector<double>& offsets) {
  GapStats s;
  const double n = static_cast<double>(offsets.size() - 1);
  for (size_t i = 1; i < offsets.size(); ++i) s.mean += offsets[i] - offsets[i - 1];
  s.mean /= n;
  for (size_t i = 1; i < offsets.size(); ++i) {
    const double d = offsets[i] - offsets[i - 1] - s.mean;
    s.variance += d * d;
  }
  s.variance /= n;
  return s;
}

TEST(ArrivalOffsetsTest, PoissonGapsAverageOneOverTheRate) {
  const std::vector<double> offsets = ArrivalOffsets(100001, 4.0, 1.0, 7);
  ASSERT_EQ(offsets.size(), 100001u);
  EXPECT_EQ(offsets[0], 0);
  for (size_t i = 1; i < offsets.size(); ++i) ASSERT_GE(offsets[i], offsets[i - 1]);
  const GapStats s = Gaps(offsets);
  // Exponential gaps of mean 0.25 s: the mean of 1e5 has a standard error of 0.25/316,
  // so 0.005 is over 6 standard errors; the variance is 1/rate^2.
  EXPECT_NEAR(s.mean, 0.25, 0.005);
  EXPECT_NEAR(s.variance, 0.0625, 0.0625 * 0.05);
}

TEST(ArrivalOffsetsTest, BurstinessKeepsTheMeanAndChangesTheSpread) {
  // Gamma gaps of shape k keep the mean 1/rate with variance 1/(k rate^2).
  const GapStats bursty = Gaps(ArrivalOffsets(100001, 10.0, 0.25, 1));
  EXPECT_NEAR(bursty.mean, 0.1, 0.004);
  EXPECT_NEAR(bursty.variance, 0.04, 0.04 * 0.1);
  const GapStats steady = Gaps(ArrivalOffsets(100001, 10.0, 4.0, 1));
  EXPECT_NEAR(steady.mean, 0.1, 0.001);
  EXPECT_NEAR(steady.variance, 0.0025, 0.0025 * 0.05);
}

TEST(ArrivalOffsetsTest, InfiniteRateSendsAllAtOnceAndSeedsReproduce) {
  for (double t : ArrivalOffsets(50, INFINITY, 1.0, 0)) EXPECT_EQ(t, 0);
  EXPECT_EQ(ArrivalOffsets(100, 3.0, 1.0, 5), ArrivalOffsets(100, 3.0, 1.0, 5));
  EXPECT_NE(ArrivalOffsets(100, 3.0, 1.0, 5), ArrivalOffsets(100, 3.0, 1.0, 6));
}

// Ends each request a while after it starts, on a loop of its own (a timer queue and a
// queue of posted functions), and counts the requests inside it at once.
class FakeClient : public BenchClient {
 public:
  explicit FakeClient(std::chrono::milliseconds work) : work_(work) {}

  void Start(const BenchPrompt& prompt, Done done) override {
    EXPECT_EQ(std::this_thread::get_id(), loop_thread_);
    max_active_ = std::max(max_active_, ++active_);
    RequestResult r;
    r.success = prompt.output_len % 5 != 0;  // every fifth fails
    if (!r.success) r.error = "fake failure";
    r.prompt_len = prompt.prompt_len;
    r.output_tokens = prompt.output_len;
    timers_.emplace(std::chrono::steady_clock::now() + work_, [this, r, done = std::move(done)] {
      --active_;
      done(r);
    });
  }
  void Post(std::function<void()> fn) override {
    std::lock_guard<std::mutex> lock(mu_);
    posted_.push_back(std::move(fn));
    wake_.notify_one();
  }
  void Run() override {
    loop_thread_ = std::this_thread::get_id();
    stop_ = false;
    while (!stop_) {
      std::function<void()> next;
      {
        std::unique_lock<std::mutex> lock(mu_);
        auto due = [&] {
          return !posted_.empty() ||
                 (!timers_.empty() && timers_.begin()->first <= std::chrono::steady_clock::now());
        };
        if (timers_.empty()) {
          wake_.wait(lock, due);
        } else {
          wake_.wait_until(lock, timers_.begin()->first, due);
        }
        if (!posted_.empty()) {
          next = std::move(posted_.front());
          posted_.pop_front();
        } else if (!timers_.empty() && timers_.begin()->first <= std::chrono::steady_clock::now()) {
          next = std::move(timers_.begin()->second);
          timers_.erase(timers_.begin());
        }
      }
      if (next) next();
    }
  }
  void Stop() override { stop_ = true; }

  int max_active() const { return max_active_; }

 private:
  std::chrono::milliseconds work_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> posted_;
  // The loop thread's alone.
  std::multimap<std::chrono::steady_clock::time_point, std::function<void()>> timers_;
  std::thread::id loop_thread_;
  bool stop_ = false;
  int active_ = 0;
  int max_active_ = 0;
};

std::vector<BenchPrompt> Prompts(int n) {
  std::vector<BenchPrompt> prompts(n);
  for (int i = 0; i < n; ++i) {
    prompts[i].prompt_len = i;
    prompts[i].output_len = i + 1;
  }
  return prompts;
}

TEST(RunLoadTest, CapsConcurrencyAndKeepsPromptOrder) {
  FakeClient client(std::chrono::milliseconds(20));
  LoadOptions options;
  options.max_concurrency = 4;
  std::vector<int64_t> progress;
  options.on_done = [&](int64_t done, int64_t, double) { progress.push_back(done); };
  auto run = RunLoad(client, Prompts(30), options);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(client.max_active(), 4);
  EXPECT_LE(PeakConcurrency(run->results), 4);
  ASSERT_EQ(run->results.size(), 30u);
  int failed = 0;
  for (int i = 0; i < 30; ++i) {
    EXPECT_EQ(run->results[i].prompt_len, i);
    EXPECT_GE(run->results[i].end_s - run->results[i].start_s, 0.019);
    failed += run->results[i].success ? 0 : 1;
  }
  EXPECT_EQ(failed, 6);
  // 30 requests of 20 ms, 4 at a time: at least 8 rounds.
  EXPECT_GE(run->duration_s, 0.16);
  ASSERT_EQ(progress.size(), 30u);
  for (int i = 0; i < 30; ++i) EXPECT_EQ(progress[i], i + 1);
}

TEST(RunLoadTest, OneRequestRunsOnTheCallingThreadsLoop) {
  FakeClient client(std::chrono::milliseconds(5));
  const RequestResult r = client.Send(Prompts(2)[1]);
  EXPECT_TRUE(r.success);
  EXPECT_EQ(r.output_tokens, 2);
  EXPECT_EQ(client.max_active(), 1);
}

TEST(RunLoadTest, NoPromptsIsAnEmptyRun) {
  FakeClient client(std::chrono::milliseconds(5));
  auto run = RunLoad(client, {}, LoadOptions{});
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_TRUE(run->results.empty());
}

TEST(RunLoadTest, WithoutALimitEverythingRunsAtOnce) {
  FakeClient client(std::chrono::milliseconds(100));
  auto run = RunLoad(client, Prompts(16), LoadOptions{});
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(client.max_active(), 16);
  EXPECT_LT(run->duration_s, 1.0);
}

TEST(RunLoadTest, RequestsAreNotSentBeforeTheyArrive) {
  FakeClient client(std::chrono::milliseconds(1));
  LoadOptions options;
  options.request_rate = 100;
  options.seed = 9;
  auto run = RunLoad(client, Prompts(40), options);
  ASSERT_TRUE(run.ok()) << run.status();
  const std::vector<double> arrivals = ArrivalOffsets(40, 100, 1.0, 9);
  for (size_t i = 0; i < arrivals.size(); ++i) {
    EXPECT_GE(run->results[i].start_s, arrivals[i]);
    EXPECT_LT(run->results[i].start_s, arrivals[i] + 0.25);  // and not much later
  }
  EXPECT_GE(run->duration_s, arrivals.back());
}

}  // namespace
}  // namespace baton::tools
