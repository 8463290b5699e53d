// How a benchmark's metrics are shown: the table on stdout (laid out like vLLM's) and
// the JSON of --result-file (vLLM's key names, so existing plotting scripts read it).
#pragma once

#include <span>
#include <string>

#include "nlohmann/json.hpp"
#include "tools/bench_serve_result.h"
#include "tools/bench_serve_stats.h"

namespace baton::tools {

std::string FormatReport(const BenchMetrics& m);

// Flat keys: completed, failed, duration, total_input_tokens, ..., mean_ttft_ms,
// median_ttft_ms, std_ttft_ms, p99_ttft_ms, ... (one pXX per requested percentile).
nlohmann::ordered_json MetricsJson(const BenchMetrics& m);

// Per-request arrays in prompt order (vLLM's --save-detailed): input_lens, output_lens,
// ttfts, e2els, itls (seconds), start_times, errors.
nlohmann::ordered_json DetailedJson(std::span<const RequestResult> results);

}  // namespace baton::tools
