#include "tools/bench_serve_load.h"

#include <cmath>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <random>
#include <system_error>
#include <thread>

#include "common/strings.h"

namespace baton::tools {

std::vector<double> ArrivalOffsets(int64_t n, double request_rate, double burstiness,
                                   uint64_t seed) {
  std::vector<double> offsets(static_cast<size_t>(std::max<int64_t>(n, 0)), 0.0);
  if (!std::isfinite(request_rate)) return offsets;
  // Its own stream, so that the arrivals do not change when the dataset draws more.
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ULL);
  // Mean shape * scale = 1 / rate whatever the burstiness.
  std::gamma_distribution<double> gap(burstiness, 1.0 / (request_rate * burstiness));
  double t = 0;
  for (size_t i = 1; i < offsets.size(); ++i) {
    t += gap(rng);
    offsets[i] = t;
  }
  return offsets;
}

absl::StatusOr<LoadResult> RunLoad(BenchClient& client, const std::vector<BenchPrompt>& prompts,
                                   const LoadOptions& options) {
  const int64_t n = static_cast<int64_t>(prompts.size());
  const std::vector<double> offsets =
      ArrivalOffsets(n, options.request_rate, options.burstiness, options.seed);
  LoadResult out;
  out.results.resize(prompts.size());

  // A fixed pool of `max_concurrency` workers taking arrived requests in order is the
  // concurrency limit itself: no request can start without a free worker.
  const int64_t workers = options.max_concurrency > 0 ? std::min(options.max_concurrency, n) : n;
  std::mutex mu;
  std::condition_variable arrived;
  std::deque<size_t> queue;
  bool closed = false;
  int64_t done = 0;
  int64_t failed = 0;
  BenchClock::time_point start{};

  auto work = [&] {
    for (;;) {
      size_t i;
      {
        std::unique_lock<std::mutex> lock(mu);
        arrived.wait(lock, [&] { return closed || !queue.empty(); });
        if (queue.empty()) return;
        i = queue.front();
        queue.pop_front();
      }
      const BenchClock::time_point sent = BenchClock::now();
      RequestResult r = client.Send(prompts[i]);
      const BenchClock::time_point ended = BenchClock::now();
      r.start_s = std::chrono::duration<double>(sent - start).count();
      r.end_s = std::chrono::duration<double>(ended - start).count();
      std::lock_guard<std::mutex> lock(mu);
      ++done;
      if (!r.success) ++failed;
      out.results[i] = std::move(r);
      if (options.on_done) {
        options.on_done(done, failed, std::chrono::duration<double>(ended - start).count());
      }
    }
  };

  std::vector<std::thread> threads;
  auto stop = [&] {
    {
      std::lock_guard<std::mutex> lock(mu);
      closed = true;
    }
    arrived.notify_all();
    for (std::thread& t : threads) t.join();
  };
  // The threads start before the clock does, so that starting them costs no request time.
  try {
    threads.reserve(static_cast<size_t>(workers));
    for (int64_t w = 0; w < workers; ++w) threads.emplace_back(work);
  } catch (const std::system_error& e) {
    const size_t started = threads.size();
    stop();
    return absl::ResourceExhaustedError(StrCat("could start only ", started, " of ", workers,
                                               " request threads (", e.what(),
                                               "); lower --max-concurrency"));
  }

  start = BenchClock::now();
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::this_thread::sleep_until(start + std::chrono::duration_cast<BenchClock::duration>(
                                              std::chrono::duration<double>(offsets[i])));
    {
      std::lock_guard<std::mutex> lock(mu);
      queue.push_back(i);
    }
    arrived.notify_one();
  }
  stop();
  out.duration_s = std::chrono::duration<double>(BenchClock::now() - start).count();
  return out;
}

}  // namespace baton::tools
