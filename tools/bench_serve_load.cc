#include "tools/bench_serve_load.h"

#include <cmath>
#include <deque>
#include <functional>
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
  if (n == 0) return out;

  // The loop thread's alone: requests that arrived and wait for a slot, in arrival order.
  const int64_t limit = options.max_concurrency > 0 ? options.max_concurrency : n;
  std::deque<size_t> waiting;
  int64_t active = 0;
  int64_t done = 0;
  int64_t failed = 0;
  BenchClock::time_point start{};
  auto seconds = [&](BenchClock::time_point t) {
    return std::chrono::duration<double>(t - start).count();
  };

  std::function<void(size_t)> send = [&](size_t i) {
    ++active;
    const BenchClock::time_point sent = BenchClock::now();
    client.Start(prompts[i], [&, i, sent](RequestResult r) {
      const BenchClock::time_point ended = BenchClock::now();
      r.start_s = seconds(sent);
      r.end_s = seconds(ended);
      --active;
      ++done;
      if (!r.success) ++failed;
      out.results[i] = std::move(r);
      if (options.on_done) options.on_done(done, failed, seconds(ended));
      if (done == n) {
        out.duration_s = seconds(BenchClock::now());
        client.Stop();
        return;
      }
      if (!waiting.empty()) {
        const size_t next = waiting.front();
        waiting.pop_front();
        send(next);
      }
    });
  };

  std::thread loop;
  try {
    loop = std::thread([&] { client.Run(); });
  } catch (const std::system_error& e) {
    return absl::ResourceExhaustedError(
        StrCat("could not start the client's loop thread: ", e.what()));
  }
  start = BenchClock::now();
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::this_thread::sleep_until(start + std::chrono::duration_cast<BenchClock::duration>(
                                              std::chrono::duration<double>(offsets[i])));
    client.Post([&, i] {
      if (active < limit) {
        send(i);
      } else {
        waiting.push_back(i);
      }
    });
  }
  loop.join();
  return out;
}

}  // namespace baton::tools
