// The process metrics every Prometheus client library exports, under their standard names
// (process_cpu_seconds_total, process_resident_memory_bytes, ...), read from /proc/self at
// each scrape so that they cost nothing between scrapes. RenderMetrics (metrics.h) appends
// them to every registry it renders, so every Baton process serves them.
#pragma once

#include <vector>

#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace baton::service {

class ProcessCollector : public prometheus::Collectable {
 public:
  // Families for what /proc could be read; a missing /proc (not Linux) yields only
  // process_max_fds.
  std::vector<prometheus::MetricFamily> Collect() const override;
};

}  // namespace baton::service
