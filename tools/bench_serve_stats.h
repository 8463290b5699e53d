// The numbers a serving benchmark reports, computed from per-request results the way
// vLLM's `bench serve` computes them: percentiles by linear interpolation (numpy's
// default), population standard deviation, ITLs pooled over all requests, TPOT over the
// requests with more than one output token.
//
//   BATON_ASSIGN_OR_RETURN(SloTargets slos, ParseGoodput({"ttft:200", "tpot:50"}));
//   BenchMetrics m = ComputeMetrics(results, duration_s, {50, 99}, slos);
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/bench_serve_result.h"

namespace baton::tools {

// The p-th percentile (0..100) of sorted values, interpolating linearly between the two
// nearest ranks: rank = p/100 * (n-1). 0 for no values.
double Percentile(std::span<const double> sorted, double p);

struct Distribution {
  size_t count = 0;
  double mean = 0;
  double median = 0;
  double stddev = 0;
  std::vector<std::pair<double, double>> percentiles;  // (p, value)
};

Distribution Summarize(std::vector<double> values, std::span<const double> percentiles);

// "50,90,99" -> {50, 90, 99}; each in (0, 100].
absl::StatusOr<std::vector<double>> ParsePercentiles(std::string_view text);

// Service-level objectives in milliseconds; a request is "good" when it meets all given.
struct SloTargets {
  std::optional<double> ttft_ms;
  std::optional<double> tpot_ms;
  std::optional<double> e2el_ms;
  bool empty() const { return !ttft_ms && !tpot_ms && !e2el_ms; }
};

// {"ttft:200", "tpot:50", "e2el:3000"} (vLLM's --goodput KEY:MS pairs).
absl::StatusOr<SloTargets> ParseGoodput(const std::vector<std::string>& specs);

// Whether a successful request meets every objective (TPOT is 0 for one output token).
bool MeetsSlos(const RequestResult& r, const SloTargets& slos);

// The most requests in flight at once, from their start and end times.
int64_t PeakConcurrency(std::span<const RequestResult> results);

struct BenchMetrics {
  int64_t completed = 0;
  int64_t failed = 0;
  double duration_s = 0;
  int64_t total_input_tokens = 0;    // completed requests: the server's count, else the dataset's
  int64_t total_output_tokens = 0;   // completed requests
  int64_t total_cached_tokens = -1;  // -1 when no server reported any
  double request_throughput = 0;     // completed per second
  std::optional<double> request_goodput;  // good per second, when SLOs were given
  int64_t good_requests = 0;
  double output_throughput = 0;
  double total_token_throughput = 0;
  int64_t peak_concurrency = 0;
  // In milliseconds.
  Distribution ttft_ms;
  Distribution tpot_ms;
  Distribution itl_ms;
  Distribution e2el_ms;
};

BenchMetrics ComputeMetrics(std::span<const RequestResult> results, double duration_s,
                            std::span<const double> percentiles, const SloTargets& slos);

}  // namespace baton::tools
