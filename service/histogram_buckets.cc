#include "service/histogram_buckets.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "common/strings.h"

namespace baton::service {

const std::vector<std::string_view>& ConfigurableHistograms() {
  static const std::vector<std::string_view> names = {
      // Router (as the client sees a request).
      "router_time_to_first_token_seconds",
      "router_inter_token_latency_seconds",
      "router_time_per_output_token_seconds",
      "router_e2e_request_latency_seconds",
      // Worker (the engine).
      "request_queue_time_seconds",
      "request_prefill_time_seconds",
      "request_decode_time_seconds",
      "request_prompt_tokens",
      "request_generation_tokens",
      "iteration_tokens",
  };
  return names;
}

absl::StatusOr<HistogramBuckets> HistogramBuckets::Parse(const std::vector<std::string>& specs) {
  HistogramBuckets out;
  const auto& known = ConfigurableHistograms();
  for (const std::string& spec : specs) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos) {
      return absl::InvalidArgumentError(
          StrCat("--histogram-buckets '", spec,
                 "' has no '='; write NAME=v1,v2,... (for example request_queue_time_seconds="
                 "0.1,1,10)"));
    }
    const std::string name = spec.substr(0, eq);
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      std::string list;
      for (std::string_view k : known) list += StrCat(list.empty() ? "" : ", ", k);
      return absl::InvalidArgumentError(StrCat("--histogram-buckets names '", name,
                                               "', which is not a histogram Baton serves; use "
                                               "one of: ",
                                               list));
    }
    BucketBoundaries bounds;
    const std::string values = spec.substr(eq + 1);
    size_t start = 0;
    while (start <= values.size()) {
      size_t comma = values.find(',', start);
      if (comma == std::string::npos) comma = values.size();
      const std::string item = values.substr(start, comma - start);
      char* end = nullptr;
      const double v = item.empty() ? NAN : std::strtod(item.c_str(), &end);
      if (item.empty() || end != item.c_str() + item.size() || !std::isfinite(v)) {
        return absl::InvalidArgumentError(
            StrCat("--histogram-buckets ", name, ": '", item,
                   "' is not a finite number; give the upper bounds as v1,v2,... (+Inf is "
                   "always added)"));
      }
      if (!bounds.empty() && v <= bounds.back()) {
        return absl::InvalidArgumentError(StrCat("--histogram-buckets ", name, ": ", v, " follows ",
                                                 bounds.back(),
                                                 "; the bounds must be strictly ascending"));
      }
      bounds.push_back(v);
      start = comma + 1;
    }
    out.overrides_[name] = std::move(bounds);
  }
  return out;
}

BucketBoundaries HistogramBuckets::For(std::string_view name,
                                       const BucketBoundaries& defaults) const {
  auto it = overrides_.find(std::string(name));
  return it == overrides_.end() ? defaults : it->second;
}

BucketBoundaries TimeToFirstTokenBuckets() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
          1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
}

BucketBoundaries TokenLatencyBuckets() {
  return {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
          0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
}

BucketBoundaries RequestLatencyBuckets() {
  return {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
          30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
}

BucketBoundaries TokenCountBuckets(int64_t max_tokens) {
  BucketBoundaries out;
  for (double decade = 1;; decade *= 10) {
    for (double m : {1.0, 2.0, 5.0}) {
      const double b = m * decade;
      if (b > static_cast<double>(max_tokens)) return out.empty() ? BucketBoundaries{1} : out;
      out.push_back(b);
    }
  }
}

BucketBoundaries IterationTokenBuckets() {
  return {1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};
}

}  // namespace baton::service
