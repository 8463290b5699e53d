// Histogram bucket boundaries: vLLM's defaults for the serving histograms (so that a
// dashboard built for vLLM's /metrics reads Baton's the same way), and the operator's
// overrides from --histogram-buckets NAME=v1,v2,... (NAME without the baton_ prefix).
//
//   BATON_ASSIGN_OR_RETURN(HistogramBuckets buckets, HistogramBuckets::Parse(flags.buckets));
//   family.Add(labels, buckets.For("request_queue_time_seconds", RequestLatencyBuckets()));
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "prometheus/histogram.h"

namespace baton::service {

using BucketBoundaries = prometheus::Histogram::BucketBoundaries;

// The histograms whose buckets --histogram-buckets may set (names without baton_).
const std::vector<std::string_view>& ConfigurableHistograms();

class HistogramBuckets {
 public:
  // Each spec is NAME=v1,v2,...: NAME one of ConfigurableHistograms(), the bounds finite
  // and strictly ascending, at least one. A later spec for the same NAME wins.
  static absl::StatusOr<HistogramBuckets> Parse(const std::vector<std::string>& specs);

  // The override for `name`, else `defaults`.
  BucketBoundaries For(std::string_view name, const BucketBoundaries& defaults) const;

 private:
  absl::flat_hash_map<std::string, BucketBoundaries> overrides_;
};

// vLLM's boundaries (vllm/v1/metrics/loggers.py).
// time_to_first_token_seconds: 1 ms to 2560 s.
BucketBoundaries TimeToFirstTokenBuckets();
// inter_token_latency_seconds and request_time_per_output_token_seconds: 10 ms to 80 s.
BucketBoundaries TokenLatencyBuckets();
// e2e, queue, prefill and decode time per request: 0.3 s to 7680 s (two hours).
BucketBoundaries RequestLatencyBuckets();
// Tokens per request: 1, 2, 5, 10, 20, 50, ... up to `max_tokens` (vLLM's 1-2-5 series
// up to max_model_len).
BucketBoundaries TokenCountBuckets(int64_t max_tokens);
// Tokens per engine step: 1, 8, 16, 32, ... 16384 (vLLM's CUDA-graph batch sizes).
BucketBoundaries IterationTokenBuckets();

}  // namespace baton::service
