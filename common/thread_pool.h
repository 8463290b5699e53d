// A fixed pool of worker threads for data-parallel kernels. The calling thread takes
// part, so a pool of N threads has N-1 workers. Dispatch is built for many short jobs
// (one per matmul in a decode step): workers spin briefly before they sleep.
//
//   ThreadPool pool(4);
//   pool.ParallelFor(rows, [&](int64_t begin, int64_t end) { ... });
//
// ParallelFor splits [0, n) into at most 4 * num_threads() contiguous ranges (or
// chunks_per_thread * num_threads(), up to 16 per thread) whose bounds depend only on n,
// `grain`, that count and num_threads(), never on timing. Each thread (the caller is
// thread 0) owns a run of consecutive ranges, but a thread that is done with its own runs
// ranges others have not started, so fn must not depend on which thread runs it. It is
// not reentrant: one ParallelFor at a time per pool.
#pragma once

#include <cstdint>
#include <functional>

namespace baton {

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);  // num_threads <= 0: hardware concurrency
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const;
  // Runs fn(begin, end) over a partition of [0, n) into ranges of at least `grain` items
  // (except possibly the last), and returns when all are done.
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);
  // The same with up to chunks_per_thread ranges per thread (1-16, clamped): long jobs of
  // many even items lose less to the last range (a thread done early takes whole ranges).
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn,
                   int64_t chunks_per_thread);

 private:
  struct State;
  State* state_;
};

}  // namespace baton
