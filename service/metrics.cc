#include "service/metrics.h"

#include "prometheus/text_serializer.h"
#include "service/build_info.h"
#include "service/process_collector.h"

namespace baton::service {
namespace {

prometheus::MetricFamily BuildInfoFamily() {
  prometheus::MetricFamily f;
  f.name = "baton_build_info";
  f.help = "1, labelled with the version and git commit this binary was built from";
  f.type = prometheus::MetricType::Gauge;
  prometheus::ClientMetric m;
  m.label = {{"commit", std::string(BuildCommit())}, {"version", std::string(BuildVersion())}};
  m.gauge.value = 1;
  f.metric.push_back(std::move(m));
  return f;
}

}  // namespace

std::string RenderMetrics(const prometheus::Registry& registry) {
  std::vector<prometheus::MetricFamily> families = registry.Collect();
  // Every process serves these, whatever it registered.
  families.push_back(BuildInfoFamily());
  for (auto& f : ProcessCollector().Collect()) families.push_back(std::move(f));
  return prometheus::TextSerializer().Serialize(families);
}

prometheus::Histogram::BucketBoundaries LatencyBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 60.0};
}

}  // namespace baton::service
