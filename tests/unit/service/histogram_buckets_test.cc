#include "service/histogram_buckets.h"

#include <algorithm>
#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::service {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(HistogramBucketsTest, OverrideReplacesTheDefaultForThatNameOnly) {
  auto b = HistogramBuckets::Parse({"request_queue_time_seconds=0.1,1,10"});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_THAT(b->For("request_queue_time_seconds", RequestLatencyBuckets()),
              ElementsAre(0.1, 1, 10));
  EXPECT_EQ(b->For("request_decode_time_seconds", RequestLatencyBuckets()),
            RequestLatencyBuckets());
}

TEST(HistogramBucketsTest, LaterSpecWins) {
  auto b = HistogramBuckets::Parse({"iteration_tokens=1,2", "iteration_tokens=4"});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_THAT(b->For("iteration_tokens", {}), ElementsAre(4));
}

TEST(HistogramBucketsTest, RefusesBadSpecsNamingTheFlagAndTheMetric) {
  struct Case {
    const char* spec;
    const char* says;
  };
  for (const Case& c : {Case{"request_queue_time_seconds", "no '='"},
                        Case{"nonsense_seconds=1", "nonsense_seconds"},
                        Case{"request_queue_time_seconds=", "not a finite number"},
                        Case{"request_queue_time_seconds=1,,2", "not a finite number"},
                        Case{"request_queue_time_seconds=1,inf", "not a finite number"},
                        Case{"request_queue_time_seconds=1,nan", "not a finite number"},
                        Case{"request_queue_time_seconds=1,2x", "not a finite number"},
                        Case{"request_queue_time_seconds=2,1", "ascending"},
                        Case{"request_queue_time_seconds=1,1", "ascending"}}) {
    auto b = HistogramBuckets::Parse({c.spec});
    ASSERT_FALSE(b.ok()) << c.spec;
    EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument) << c.spec;
    EXPECT_THAT(b.status().message(), HasSubstr("--histogram-buckets")) << c.spec;
    EXPECT_THAT(b.status().message(), HasSubstr(c.says)) << c.spec;
  }
}

TEST(HistogramBucketsTest, DefaultsAreAscendingAndFinite) {
  for (const BucketBoundaries& b :
       {TimeToFirstTokenBuckets(), TokenLatencyBuckets(), RequestLatencyBuckets(),
        TokenCountBuckets(4096), IterationTokenBuckets()}) {
    ASSERT_FALSE(b.empty());
    EXPECT_TRUE(std::adjacent_find(b.begin(), b.end(), std::greater_equal<>()) == b.end());
    EXPECT_TRUE(std::all_of(b.begin(), b.end(), [](double v) { return std::isfinite(v); }));
  }
  // vLLM's e2e histogram reaches two hours.
  EXPECT_EQ(RequestLatencyBuckets().back(), 7680.0);
}

TEST(HistogramBucketsTest, TokenCountsFollowOneTwoFiveUpToTheMaximum) {
  EXPECT_THAT(TokenCountBuckets(1000), ElementsAre(1, 2, 5, 10, 20, 50, 100, 200, 500, 1000));
  EXPECT_THAT(TokenCountBuckets(60), ElementsAre(1, 2, 5, 10, 20, 50));
  EXPECT_THAT(TokenCountBuckets(0), ElementsAre(1));
}

TEST(HistogramBucketsTest, EveryConfigurableNameParses) {
  for (std::string_view name : ConfigurableHistograms()) {
    EXPECT_TRUE(HistogramBuckets::Parse({std::string(name) + "=1,2"}).ok()) << name;
  }
}

}  // namespace
}  // namespace baton::service
