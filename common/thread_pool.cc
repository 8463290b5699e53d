#include "common/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/check.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace baton {
namespace {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// A decode step calls ParallelFor about ten times per layer with a few microseconds of
// serial work in between; a worker that spins that long answers the next call in well
// under a microsecond, while one that slept needs a futex wake (several microseconds).
// Past this budget the worker sleeps, so an idle pool costs no CPU. After the first
// part of it a waiting thread also yields between checks: with more threads than cores
// (tests, a shared machine) the thread it waits for may need its core.
constexpr auto kSpinBudget = std::chrono::microseconds(200);
constexpr auto kPauseOnlyBudget = std::chrono::microseconds(20);
constexpr int kPausesPerClockCheck = 64;

// Spins until done() or the budget runs out; returns done().
template <class Done>
bool SpinWait(std::chrono::microseconds budget, const Done& done) {
  const auto start = std::chrono::steady_clock::now();
  bool yielding = false;
  while (true) {
    for (int i = 0; i < kPausesPerClockCheck; ++i) {
      if (done()) return true;
      CpuRelax();
    }
    if (yielding) std::this_thread::yield();
    const auto spent = std::chrono::steady_clock::now() - start;
    if (spent > budget) return done();
    yielding = spent > kPauseOnlyBudget;
  }
}

// The generation word packs a sequence number with the number of chunks of the job it
// announces, so that a worker without a chunk learns so from one atomic load and never
// touches the job fields, which the next call may already be rewriting.
constexpr int kChunkBits = 16;
constexpr uint64_t kChunkMask = (uint64_t{1} << kChunkBits) - 1;
// Each thread has up to this many chunks of a job; the ones it has not started yet can be
// taken by a thread that is done with its own. On a shared machine two cores of the same
// VM can differ in speed by a quarter for minutes (measured here), and a split into equal
// halves then waits for the slower core on every call.
constexpr int64_t kChunksPerThread = 4;
// Callers may ask for more (ParallelFor's last argument), up to this.
constexpr int64_t kMaxChunksPerThread = 16;
constexpr int kMaxThreads = static_cast<int>(kChunkMask / kMaxChunksPerThread);

// Chunk c of n items split into `chunks` nearly equal contiguous ranges.
inline void ChunkBounds(int64_t n, int64_t chunks, int64_t c, int64_t* begin, int64_t* end) {
  const int64_t base = n / chunks;
  const int64_t rem = n % chunks;
  *begin = c * base + std::min(c, rem);
  *end = *begin + base + (c < rem ? 1 : 0);
}

}  // namespace

// The chunks of a job are dealt to the threads in contiguous runs (the caller is thread 0):
// each thread runs its own run in order, then takes chunks nobody has started, from the
// end of the job backwards, so the owner and the thief meet in the middle. Each chunk has
// a claim word holding the sequence number of the last job that claimed it; whoever moves
// it to the current job's number runs the chunk. A thread that is slower, descheduled or
// slow to wake therefore delays little. Only who runs a chunk varies, never its bounds.
struct ThreadPool::State {
  int num_threads = 1;
  std::vector<std::thread> workers;

  // Job fields: written by the caller before it publishes a new generation, read only by
  // threads that claimed a chunk of it, which the caller waits for before it returns.
  const std::function<void(int64_t, int64_t)>* fn = nullptr;
  int64_t n = 0;

  struct alignas(64) Claim {
    std::atomic<uint64_t> seq{0};
  };
  std::unique_ptr<Claim[]> claims;

  alignas(64) std::atomic<uint64_t> generation{0};
  alignas(64) std::atomic<int> pending{0};
  alignas(64) std::atomic<int> sleepers{0};
  std::atomic<bool> busy{false};
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;  // guarded by mu

  bool TryClaim(int64_t chunk, uint64_t seq) {
    uint64_t prev = claims[chunk].seq.load(std::memory_order_relaxed);
    return prev < seq &&
           claims[chunk].seq.compare_exchange_strong(prev, seq, std::memory_order_acq_rel);
  }
  void RunChunk(int64_t chunk, int64_t chunks) {
    int64_t begin = 0;
    int64_t end = 0;
    ChunkBounds(n, chunks, chunk, &begin, &end);
    (*fn)(begin, end);
    pending.fetch_sub(1, std::memory_order_acq_rel);
  }
  // Runs thread `index`'s own chunks of job `seq`, then any left unclaimed.
  void RunShare(int index, int64_t chunks, uint64_t seq) {
    const int64_t own_begin = chunks * index / num_threads;
    const int64_t own_end = chunks * (index + 1) / num_threads;
    for (int64_t c = own_begin; c < own_end; ++c) {
      if (TryClaim(c, seq)) RunChunk(c, chunks);
    }
    for (int64_t c = chunks - 1; c >= 0; --c) {
      if (pending.load(std::memory_order_relaxed) == 0) return;
      if (TryClaim(c, seq)) RunChunk(c, chunks);
    }
  }
  void WorkerLoop(int index);
};

void ThreadPool::State::WorkerLoop(int index) {
  uint64_t seen = 0;
  while (true) {
    uint64_t gen = generation.load(std::memory_order_acquire);
    if (gen == seen) {
      SpinWait(kSpinBudget, [&] {
        gen = generation.load(std::memory_order_acquire);
        return gen != seen;
      });
      if (gen == seen) {
        std::unique_lock<std::mutex> lock(mu);
        // sleepers is raised before the generation is read again; the caller stores the
        // generation before it reads sleepers. With both seq_cst, one of the two sees the
        // other, so a wake-up cannot be lost.
        sleepers.fetch_add(1, std::memory_order_seq_cst);
        while (!stop && (gen = generation.load(std::memory_order_seq_cst)) == seen) {
          cv.wait(lock);
        }
        sleepers.fetch_sub(1, std::memory_order_relaxed);
        if (stop) return;
      }
    }
    seen = gen;
    // A stale generation (the job is over) fails every claim: its chunks were all claimed.
    RunShare(index, static_cast<int64_t>(gen & kChunkMask), gen >> kChunkBits);
  }
}

ThreadPool::ThreadPool(int num_threads) : state_(new State) {
  if (num_threads <= 0) num_threads = static_cast<int>(std::thread::hardware_concurrency());
  num_threads = std::clamp(num_threads, 1, kMaxThreads);
  state_->num_threads = num_threads;
  state_->claims = std::make_unique<State::Claim[]>(num_threads * kMaxChunksPerThread);
  state_->workers.reserve(num_threads - 1);
  for (int i = 1; i < num_threads; ++i) {
    state_->workers.emplace_back([s = state_, i] { s->WorkerLoop(i); });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stop = true;
  }
  state_->cv.notify_all();
  // A spinning worker only looks at the generation, so publish one more; with no chunks
  // it gives nothing to run, and the worker then falls asleep and sees `stop`.
  const uint64_t seq = (state_->generation.load(std::memory_order_relaxed) >> kChunkBits) + 1;
  state_->generation.store(seq << kChunkBits, std::memory_order_seq_cst);
  state_->cv.notify_all();
  for (auto& t : state_->workers) t.join();
  delete state_;
}

int ThreadPool::num_threads() const { return state_->num_threads; }

void ThreadPool::ParallelFor(int64_t n, int64_t grain,
                             const std::function<void(int64_t, int64_t)>& fn) {
  ParallelFor(n, grain, fn, kChunksPerThread);
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain,
                             const std::function<void(int64_t, int64_t)>& fn,
                             int64_t chunks_per_thread) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  chunks_per_thread = std::clamp<int64_t>(chunks_per_thread, 1, kMaxChunksPerThread);
  const int64_t chunks =
      std::clamp<int64_t>(n / grain, 1, int64_t{state_->num_threads} * chunks_per_thread);
  if (chunks == 1) {
    fn(0, n);
    return;
  }
  State& s = *state_;
  BATON_CHECK(!s.busy.exchange(true, std::memory_order_acquire));  // not reentrant
  s.fn = &fn;
  s.n = n;
  s.pending.store(static_cast<int>(chunks), std::memory_order_relaxed);
  const uint64_t seq = (s.generation.load(std::memory_order_relaxed) >> kChunkBits) + 1;
  s.generation.store((seq << kChunkBits) | static_cast<uint64_t>(chunks),
                     std::memory_order_seq_cst);
  if (s.sleepers.load(std::memory_order_seq_cst) > 0) {
    // Taking the lock orders this notify after any sleeper's check of the generation.
    { std::lock_guard<std::mutex> lock(s.mu); }
    s.cv.notify_all();
  }

  s.RunShare(0, chunks, seq);
  const auto done = [&s] { return s.pending.load(std::memory_order_acquire) == 0; };
  while (!SpinWait(kSpinBudget, done)) {
  }
  s.busy.store(false, std::memory_order_release);
}

}  // namespace baton
