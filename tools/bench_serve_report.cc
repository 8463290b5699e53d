#include "tools/bench_serve_report.h"

#include <cmath>
#include <cstdio>

#include "common/strings.h"

namespace baton::tools {
namespace {

constexpr int kWidth = 50;

std::string Line(std::string_view label, double value, int precision = 2) {
  char buf[160];
  std::snprintf(buf, sizeof(buf), "%-40s %-10.*f\n", std::string(label).c_str(), precision, value);
  return buf;
}

std::string Line(std::string_view label, int64_t value) {
  char buf[160];
  std::snprintf(buf, sizeof(buf), "%-40s %-10lld\n", std::string(label).c_str(),
                static_cast<long long>(value));
  return buf;
}

std::string Rule(std::string_view title, char fill) {
  std::string out(kWidth, fill);
  if (!title.empty()) {
    const size_t at = (kWidth - title.size()) / 2;
    out.replace(at, title.size(), title);
  }
  return out + "\n";
}

// "99" for 99, "99.9" for 99.9: the key and label vLLM uses.
std::string PercentileName(double p) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", p);
  return buf;
}

std::string Section(std::string_view title, std::string_view metric, const Distribution& d) {
  std::string out = Rule(title, '-');
  out += Line(StrCat("Mean ", metric, " (ms):"), d.mean);
  out += Line(StrCat("Median ", metric, " (ms):"), d.median);
  out += Line(StrCat("Std ", metric, " (ms):"), d.stddev);
  for (const auto& [p, value] : d.percentiles) {
    out += Line(StrCat("P", PercentileName(p), " ", metric, " (ms):"), value);
  }
  return out;
}

void AddDistribution(std::string_view metric, const Distribution& d, nlohmann::ordered_json* j) {
  (*j)[StrCat("mean_", metric, "_ms")] = d.mean;
  (*j)[StrCat("median_", metric, "_ms")] = d.median;
  (*j)[StrCat("std_", metric, "_ms")] = d.stddev;
  for (const auto& [p, value] : d.percentiles) {
    (*j)[StrCat("p", PercentileName(p), "_", metric, "_ms")] = value;
  }
}

}  // namespace

std::string FormatReport(const BenchMetrics& m) {
  std::string out = Rule(" Serving Benchmark Result ", '=');
  out += Line("Successful requests:", m.completed);
  out += Line("Failed requests:", m.failed);
  out += Line("Benchmark duration (s):", m.duration_s);
  out += Line("Total input tokens:", m.total_input_tokens);
  out += Line("Total generated tokens:", m.total_output_tokens);
  if (m.total_cached_tokens >= 0) out += Line("Total cached prompt tokens:", m.total_cached_tokens);
  out += Line("Request throughput (req/s):", m.request_throughput);
  if (m.request_goodput) out += Line("Request goodput (req/s):", *m.request_goodput);
  out += Line("Output token throughput (tok/s):", m.output_throughput);
  out += Line("Total token throughput (tok/s):", m.total_token_throughput);
  out += Line("Peak concurrent requests:", m.peak_concurrency);
  out += Section(" Time to First Token ", "TTFT", m.ttft_ms);
  out += Section(" Time per Output Token (excl. 1st token) ", "TPOT", m.tpot_ms);
  out += Section(" Inter-token Latency ", "ITL", m.itl_ms);
  out += Section(" End-to-end Latency ", "E2EL", m.e2el_ms);
  out += Rule("", '=');
  return out;
}

nlohmann::ordered_json MetricsJson(const BenchMetrics& m) {
  nlohmann::ordered_json j;
  j["duration"] = m.duration_s;
  j["completed"] = m.completed;
  j["failed"] = m.failed;
  j["total_input_tokens"] = m.total_input_tokens;
  j["total_output_tokens"] = m.total_output_tokens;
  if (m.total_cached_tokens >= 0) j["total_cached_tokens"] = m.total_cached_tokens;
  j["request_throughput"] = m.request_throughput;
  j["request_goodput"] = m.request_goodput ? nlohmann::ordered_json(*m.request_goodput) : nullptr;
  j["output_throughput"] = m.output_throughput;
  j["total_token_throughput"] = m.total_token_throughput;
  j["max_concurrent_requests"] = m.peak_concurrency;
  AddDistribution("ttft", m.ttft_ms, &j);
  AddDistribution("tpot", m.tpot_ms, &j);
  AddDistribution("itl", m.itl_ms, &j);
  AddDistribution("e2el", m.e2el_ms, &j);
  return j;
}

nlohmann::ordered_json DetailedJson(std::span<const RequestResult> results) {
  nlohmann::ordered_json input_lens = nlohmann::ordered_json::array();
  nlohmann::ordered_json output_lens = nlohmann::ordered_json::array();
  nlohmann::ordered_json ttfts = nlohmann::ordered_json::array();
  nlohmann::ordered_json e2els = nlohmann::ordered_json::array();
  nlohmann::ordered_json itls = nlohmann::ordered_json::array();
  nlohmann::ordered_json starts = nlohmann::ordered_json::array();
  nlohmann::ordered_json errors = nlohmann::ordered_json::array();
  for (const RequestResult& r : results) {
    input_lens.push_back(r.prompt_tokens >= 0 ? r.prompt_tokens : r.prompt_len);
    output_lens.push_back(r.output_tokens);
    ttfts.push_back(r.ttft_s);
    e2els.push_back(r.e2el_s);
    itls.push_back(r.itl_s);
    starts.push_back(r.start_s);
    errors.push_back(r.error);
  }
  nlohmann::ordered_json j;
  j["input_lens"] = std::move(input_lens);
  j["output_lens"] = std::move(output_lens);
  j["ttfts"] = std::move(ttfts);
  j["e2els"] = std::move(e2els);
  j["itls"] = std::move(itls);
  j["start_times"] = std::move(starts);
  j["errors"] = std::move(errors);
  return j;
}

}  // namespace baton::tools
