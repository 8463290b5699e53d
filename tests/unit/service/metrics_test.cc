#include "service/metrics.h"

#include <algorithm>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/counter.h"
#include "prometheus/histogram.h"

namespace baton::service {
namespace {

using ::testing::HasSubstr;

TEST(MetricsTest, RendersCountersAndHistograms) {
  prometheus::Registry registry;
  prometheus::BuildCounter()
      .Name("baton_requests_total")
      .Help("Requests served")
      .Register(registry)
      .Add({{"endpoint", "/v1/completions"}})
      .Increment(3);
  prometheus::BuildHistogram()
      .Name("baton_request_seconds")
      .Help("Request latency")
      .Register(registry)
      .Add({}, LatencyBuckets())
      .Observe(0.003);

  const std::string text = RenderMetrics(registry);
  EXPECT_THAT(text, HasSubstr("# TYPE baton_requests_total counter"));
  EXPECT_THAT(text, HasSubstr(R"(baton_requests_total{endpoint="/v1/completions"} 3)"));
  EXPECT_THAT(text, HasSubstr("# TYPE baton_request_seconds histogram"));
  EXPECT_THAT(text, HasSubstr(R"(baton_request_seconds_bucket{le="0.0025"} 0)"));
  EXPECT_THAT(text, HasSubstr(R"(baton_request_seconds_bucket{le="0.005"} 1)"));
  EXPECT_THAT(text, HasSubstr(R"(baton_request_seconds_bucket{le="+Inf"} 1)"));
  EXPECT_THAT(text, HasSubstr("baton_request_seconds_count 1"));
  EXPECT_THAT(text, HasSubstr("baton_request_seconds_sum 0.003"));
}

TEST(MetricsTest, LatencyBucketsSpanOneMillisecondToOneMinute) {
  auto buckets = LatencyBuckets();
  ASSERT_FALSE(buckets.empty());
  EXPECT_DOUBLE_EQ(buckets.front(), 0.001);
  EXPECT_DOUBLE_EQ(buckets.back(), 60.0);
  EXPECT_TRUE(std::is_sorted(buckets.begin(), buckets.end()));
  EXPECT_EQ(std::adjacent_find(buckets.begin(), buckets.end()), buckets.end());
}

TEST(MetricsTest, EveryRenderingCarriesBuildInfoAndProcessMetrics) {
  prometheus::Registry empty;
  const std::string text = RenderMetrics(empty);
  EXPECT_THAT(text, HasSubstr("# TYPE baton_build_info gauge"));
  EXPECT_THAT(text,
              ::testing::ContainsRegex(
                  R"(baton_build_info\{commit="[^"]+",version="[0-9]+\.[0-9]+\.[0-9]+"\} 1)"));
  EXPECT_THAT(text, HasSubstr("# TYPE process_cpu_seconds_total counter"));
  EXPECT_THAT(text, HasSubstr("process_resident_memory_bytes "));
}

TEST(MetricsTest, ContentTypeIsTheTextFormat) {
  EXPECT_EQ(kMetricsContentType, "text/plain; version=0.0.4; charset=utf-8");
}

}  // namespace
}  // namespace baton::service
