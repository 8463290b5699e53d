#include "tools/bench_serve_stats.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/strings.h"

namespace baton::tools {

double Percentile(std::span<const double> sorted, double p) {
  if (sorted.empty()) return 0.0;
  const double rank = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const auto below = static_cast<size_t>(std::floor(rank));
  const size_t above = std::min(below + 1, sorted.size() - 1);
  const double frac = rank - static_cast<double>(below);
  return sorted[below] + (sorted[above] - sorted[below]) * frac;
}

Distribution Summarize(std::vector<double> values, std::span<const double> percentiles) {
  Distribution d;
  d.count = values.size();
  for (double p : percentiles) d.percentiles.emplace_back(p, 0.0);
  if (values.empty()) return d;
  std::sort(values.begin(), values.end());
  double sum = 0;
  for (double v : values) sum += v;
  d.mean = sum / static_cast<double>(values.size());
  double squares = 0;
  for (double v : values) squares += (v - d.mean) * (v - d.mean);
  d.stddev = std::sqrt(squares / static_cast<double>(values.size()));
  d.median = Percentile(values, 50);
  for (auto& [p, value] : d.percentiles) value = Percentile(values, p);
  return d;
}

absl::StatusOr<std::vector<double>> ParsePercentiles(std::string_view text) {
  std::vector<double> out;
  for (absl::string_view part :
       absl::StrSplit(absl::string_view(text.data(), text.size()), ',', absl::SkipWhitespace())) {
    double p = 0;
    if (!absl::SimpleAtod(part, &p) || !(p > 0 && p <= 100)) {
      return absl::InvalidArgumentError(
          StrCat("--percentiles takes numbers in (0, 100] separated by commas (e.g. 50,90,99); "
                 "got '",
                 std::string_view(part.data(), part.size()), "'"));
    }
    out.push_back(p);
  }
  if (out.empty()) {
    return absl::InvalidArgumentError("--percentiles needs at least one number (e.g. 99)");
  }
  return out;
}

absl::StatusOr<SloTargets> ParseGoodput(const std::vector<std::string>& specs) {
  SloTargets slos;
  for (const std::string& spec : specs) {
    const size_t colon = spec.find(':');
    double ms = 0;
    const std::string key = spec.substr(0, colon);
    if (colon == std::string::npos || !absl::SimpleAtod(spec.substr(colon + 1), &ms) ||
        !(ms >= 0) || !std::isfinite(ms)) {
      return absl::InvalidArgumentError(
          StrCat("--goodput takes KEY:MILLISECONDS pairs (ttft, tpot, e2el), e.g. "
                 "'--goodput ttft:200 tpot:50'; got '",
                 spec, "'"));
    }
    if (key == "ttft") {
      slos.ttft_ms = ms;
    } else if (key == "tpot") {
      slos.tpot_ms = ms;
    } else if (key == "e2el") {
      slos.e2el_ms = ms;
    } else {
      return absl::InvalidArgumentError(
          StrCat("--goodput: unknown metric '", key, "'; use ttft, tpot or e2el"));
    }
  }
  return slos;
}

bool MeetsSlos(const RequestResult& r, const SloTargets& slos) {
  if (!r.success) return false;
  if (slos.ttft_ms && r.ttft_s * 1000.0 > *slos.ttft_ms) return false;
  if (slos.tpot_ms && Tpot(r) * 1000.0 > *slos.tpot_ms) return false;
  if (slos.e2el_ms && r.e2el_s * 1000.0 > *slos.e2el_ms) return false;
  return true;
}

int64_t PeakConcurrency(std::span<const RequestResult> results) {
  // +1 at each start, -1 at each end; an end sorts before a start at the same instant, so
  // back-to-back requests on one connection do not count as overlapping.
  std::vector<std::pair<double, int>> events;
  events.reserve(results.size() * 2);
  for (const RequestResult& r : results) {
    events.emplace_back(r.start_s, +1);
    events.emplace_back(r.end_s, -1);
  }
  std::sort(events.begin(), events.end());
  int64_t now = 0;
  int64_t peak = 0;
  for (const auto& [t, delta] : events) {
    now += delta;
    peak = std::max(peak, now);
  }
  return peak;
}

BenchMetrics ComputeMetrics(std::span<const RequestResult> results, double duration_s,
                            std::span<const double> percentiles, const SloTargets& slos) {
  BenchMetrics m;
  m.duration_s = duration_s;
  std::vector<double> ttft, tpot, itl, e2el;
  for (const RequestResult& r : results) {
    if (!r.success) {
      ++m.failed;
      continue;
    }
    ++m.completed;
    m.total_input_tokens += r.prompt_tokens >= 0 ? r.prompt_tokens : r.prompt_len;
    m.total_output_tokens += r.output_tokens;
    if (r.cached_tokens >= 0)
      m.total_cached_tokens = std::max<int64_t>(m.total_cached_tokens, 0) + r.cached_tokens;
    ttft.push_back(r.ttft_s * 1000.0);
    e2el.push_back(r.e2el_s * 1000.0);
    if (r.output_tokens > 1) tpot.push_back(Tpot(r) * 1000.0);
    for (double gap : r.itl_s) itl.push_back(gap * 1000.0);
    if (!slos.empty() && MeetsSlos(r, slos)) ++m.good_requests;
  }
  if (duration_s > 0) {
    m.request_throughput = static_cast<double>(m.completed) / duration_s;
    m.output_throughput = static_cast<double>(m.total_output_tokens) / duration_s;
    m.total_token_throughput =
        static_cast<double>(m.total_input_tokens + m.total_output_tokens) / duration_s;
    if (!slos.empty()) m.request_goodput = static_cast<double>(m.good_requests) / duration_s;
  } else if (!slos.empty()) {
    m.request_goodput = 0.0;
  }
  m.peak_concurrency = PeakConcurrency(results);
  m.ttft_ms = Summarize(std::move(ttft), percentiles);
  m.tpot_ms = Summarize(std::move(tpot), percentiles);
  m.itl_ms = Summarize(std::move(itl), percentiles);
  m.e2el_ms = Summarize(std::move(e2el), percentiles);
  return m;
}

}  // namespace baton::tools
