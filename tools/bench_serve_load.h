// Drives a BenchClient with prompts at a given arrival rate and concurrency, the way
// vLLM's `bench serve` does: request i arrives after i gamma-distributed gaps of mean
// 1/rate (shape `burstiness`: 1 is a Poisson process, lower is burstier), and waits, in
// arrival order, for one of `max_concurrency` slots. Every request runs on the client's
// one loop thread; the calling thread only sleeps until each arrival and posts it there.
//
//   LoadResult run = RunLoad(client, prompts, {.request_rate = 10, .max_concurrency = 64});
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/bench_serve_client.h"
#include "tools/bench_serve_dataset.h"
#include "tools/bench_serve_result.h"

namespace baton::tools {

// Seconds from the start at which each of `n` requests arrives; the first at 0. An
// infinite rate sends them all at 0.
std::vector<double> ArrivalOffsets(int64_t n, double request_rate, double burstiness,
                                   uint64_t seed);

struct LoadOptions {
  double request_rate = std::numeric_limits<double>::infinity();
  double burstiness = 1.0;
  int64_t max_concurrency = 0;  // 0: no limit
  uint64_t seed = 0;
  // Called after each request ends, on the client's loop thread.
  std::function<void(int64_t done, int64_t failed, double elapsed_s)> on_done;
};

struct LoadResult {
  std::vector<RequestResult> results;  // in prompt order
  double duration_s = 0;               // from the first send to the last response's end
};

// Fails only when it cannot start the loop thread.
absl::StatusOr<LoadResult> RunLoad(BenchClient& client, const std::vector<BenchPrompt>& prompts,
                                   const LoadOptions& options);

}  // namespace baton::tools
