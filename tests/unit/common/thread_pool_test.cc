#include "common/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace baton {
namespace {

using Ranges = std::vector<std::pair<int64_t, int64_t>>;

// Runs one ParallelFor and returns its ranges, sorted; checks every index is run once.
Ranges RunAndCheck(ThreadPool& pool, int64_t n, int64_t grain) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  std::vector<std::pair<int64_t, int64_t>> ranges(static_cast<size_t>(4 * pool.num_threads()));
  std::atomic<int> calls{0};
  pool.ParallelFor(n, grain, [&](int64_t begin, int64_t end) {
    const int slot = calls.fetch_add(1);
    if (slot < static_cast<int>(ranges.size())) ranges[slot] = {begin, end};
    for (int64_t i = begin; i < end; ++i) hits[i].fetch_add(1, std::memory_order_relaxed);
  });
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << "index " << i << " n " << n;
  EXPECT_LE(calls.load(), 4 * pool.num_threads());
  ranges.resize(std::min<size_t>(ranges.size(), calls.load()));
  std::sort(ranges.begin(), ranges.end());
  return ranges;
}

TEST(ThreadPoolTest, NumThreads) {
  EXPECT_EQ(ThreadPool(1).num_threads(), 1);
  EXPECT_EQ(ThreadPool(3).num_threads(), 3);
  EXPECT_GE(ThreadPool(0).num_threads(), 1);
}

TEST(ThreadPoolTest, CoversEveryIndexOnceWithDeterministicRanges) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 2, 3, 5, 7, 8, 9, 100, 1001}) {
      for (int64_t grain : {0, 1, 3, 16, 1000}) {
        const Ranges first = RunAndCheck(pool, n, grain);
        // Contiguous, and each range has at least `grain` items unless there is one.
        ASSERT_FALSE(first.empty());
        EXPECT_EQ(first.front().first, 0);
        EXPECT_EQ(first.back().second, n);
        for (size_t r = 0; r < first.size(); ++r) {
          if (r > 0) {
            EXPECT_EQ(first[r].first, first[r - 1].second);
          }
          EXPECT_LT(first[r].first, first[r].second);
          if (first.size() > 1) {
            EXPECT_GE(first[r].second - first[r].first, std::max<int64_t>(grain, 1));
          }
        }
        for (int rep = 0; rep < 3; ++rep) EXPECT_EQ(RunAndCheck(pool, n, grain), first);
        // The partition depends on n, grain and the thread count only.
        ThreadPool other(threads);
        EXPECT_EQ(RunAndCheck(other, n, grain), first);
      }
    }
  }
}

TEST(ThreadPoolTest, FewerItemsThanThreadsUsesOneRangePerItem) {
  ThreadPool pool(8);
  const Ranges ranges = RunAndCheck(pool, 3, 1);
  EXPECT_EQ(ranges, (Ranges{{0, 1}, {1, 2}, {2, 3}}));
}

TEST(ThreadPoolTest, EmptyRangeCallsNothing) {
  ThreadPool pool(4);
  int calls = 0;
  pool.ParallelFor(0, 1, [&](int64_t, int64_t) { ++calls; });
  pool.ParallelFor(-5, 1, [&](int64_t, int64_t) { ++calls; });
  EXPECT_EQ(calls, 0);
}

TEST(ThreadPoolTest, ManyShortJobs) {
  ThreadPool pool(4);
  std::vector<int64_t> data(64);
  for (int iter = 0; iter < 5000; ++iter) {
    pool.ParallelFor(static_cast<int64_t>(data.size()), 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) data[i] += i;
    });
  }
  for (size_t i = 0; i < data.size(); ++i) EXPECT_EQ(data[i], 5000 * static_cast<int64_t>(i));
}

TEST(ThreadPoolTest, JobsLongEnoughForEveryThread) {
  // Chunks that take a while, so the workers claim theirs before the caller is done
  // with its own (and the caller takes over those of workers that are late).
  ThreadPool pool(3);
  std::vector<int64_t> data(3);
  for (int iter = 0; iter < 300; ++iter) {
    pool.ParallelFor(3, 1, [&](int64_t begin, int64_t end) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
      while (std::chrono::steady_clock::now() < until) {
      }
      for (int64_t i = begin; i < end; ++i) data[i] += 1;
    });
  }
  EXPECT_EQ(data, (std::vector<int64_t>{300, 300, 300}));
}

// A thread that is done with its own chunks runs those another thread has not started:
// with the caller slow, the worker ends up running more than its share of 4 of 8.
TEST(ThreadPoolTest, AFastThreadTakesChunksFromASlowOne) {
  ThreadPool pool(2);
  const std::thread::id caller = std::this_thread::get_id();
  int most_by_worker = 0;
  // A loaded machine may not run the worker at all during one call; a few tries suffice.
  for (int attempt = 0; attempt < 20 && most_by_worker <= 4; ++attempt) {
    std::atomic<int> by_worker{0};
    RunAndCheck(pool, 8, 1);  // the same partition as below: 8 ranges
    pool.ParallelFor(8, 1, [&](int64_t, int64_t) {
      const bool slow = std::this_thread::get_id() == caller;
      if (!slow) by_worker.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::microseconds(slow ? 3000 : 100));
    });
    most_by_worker = std::max(most_by_worker, by_worker.load());
  }
  EXPECT_GT(most_by_worker, 4);
}

TEST(ThreadPoolTest, WakesSleepingWorkers) {
  ThreadPool pool(3);
  for (int iter = 0; iter < 5; ++iter) {
    // Longer than the spin budget, so the workers are asleep at the next call.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    RunAndCheck(pool, 30, 1);
  }
}

TEST(ThreadPoolTest, SeveralPoolsFromSeveralThreads) {
  // Each caller thread drives its own pool; all of them at once.
  constexpr int kCallers = 3;
  std::vector<std::thread> callers;
  callers.reserve(kCallers);
  std::atomic<int64_t> total{0};
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&total, c] {
      ThreadPool pool(2 + c);
      for (int iter = 0; iter < 500; ++iter) {
        std::atomic<int64_t> sum{0};
        pool.ParallelFor(97, 1 + (iter % 5), [&](int64_t begin, int64_t end) {
          int64_t local = 0;
          for (int64_t i = begin; i < end; ++i) local += i;
          sum.fetch_add(local, std::memory_order_relaxed);
        });
        EXPECT_EQ(sum.load(), 97 * 96 / 2);
        total.fetch_add(1);
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(total.load(), kCallers * 500);
}

TEST(ThreadPoolTest, OnePoolUsedByCallersInTurn) {
  ThreadPool pool(3);
  std::mutex mu;
  std::vector<std::thread> callers;
  callers.reserve(3);
  for (int c = 0; c < 3; ++c) {
    callers.emplace_back([&] {
      for (int iter = 0; iter < 200; ++iter) {
        std::lock_guard<std::mutex> lock(mu);
        RunAndCheck(pool, 50, 2);
      }
    });
  }
  for (auto& t : callers) t.join();
}

TEST(ThreadPoolTest, CreateAndDestroyRepeatedly) {
  for (int iter = 0; iter < 50; ++iter) {
    auto pool = std::make_unique<ThreadPool>(1 + iter % 4);
    if (iter % 2 == 0) RunAndCheck(*pool, 10, 1);
  }
}

}  // namespace
}  // namespace baton
