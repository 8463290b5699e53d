#include "tools/bench_serve_stats.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::tools {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

TEST(PercentileTest, InterpolatesLinearlyBetweenRanks) {
  // numpy.percentile([15, 20, 35, 40, 50], p) by hand: rank = p/100 * 4.
  const std::vector<double> v = {15, 20, 35, 40, 50};
  EXPECT_DOUBLE_EQ(Percentile(v, 0), 15);
  EXPECT_DOUBLE_EQ(Percentile(v, 30), 23);    // rank 1.2: 20 + 0.2 * 15
  EXPECT_DOUBLE_EQ(Percentile(v, 40), 29);    // rank 1.6: 20 + 0.6 * 15
  EXPECT_DOUBLE_EQ(Percentile(v, 50), 35);    // rank 2
  EXPECT_DOUBLE_EQ(Percentile(v, 99), 49.6);  // rank 3.96: 40 + 0.96 * 10
  EXPECT_DOUBLE_EQ(Percentile(v, 100), 50);
  EXPECT_DOUBLE_EQ(Percentile(std::vector<double>{7}, 99), 7);
  EXPECT_DOUBLE_EQ(Percentile(std::vector<double>{}, 50), 0);
}

// An independent definition: the value v at which the empirical CDF with linear
// interpolation between order statistics x_k (at k/(n-1)) reaches p/100.
double BruteForcePercentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const double target = p / 100.0;
  for (size_t k = 0; k + 1 < v.size(); ++k) {
    const double lo = static_cast<double>(k) / static_cast<double>(v.size() - 1);
    const double hi = static_cast<double>(k + 1) / static_cast<double>(v.size() - 1);
    if (target >= lo && target <= hi) return v[k] + (v[k + 1] - v[k]) * (target - lo) / (hi - lo);
  }
  return v.back();
}

TEST(PercentileTest, MatchesABruteForceReference) {
  std::mt19937_64 rng(3);
  std::lognormal_distribution<double> latency(3.0, 0.7);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<double> values(2 + trial * 7);
    for (double& x : values) x = latency(rng);
    std::vector<double> sorted = values;
    std::sort(sorted.begin(), sorted.end());
    for (double p : {1.0, 10.0, 25.0, 50.0, 75.0, 90.0, 99.0, 99.9}) {
      EXPECT_NEAR(Percentile(sorted, p), BruteForcePercentile(values, p), 1e-9)
          << "n=" << values.size() << " p=" << p;
    }
  }
}

TEST(SummarizeTest, MeanMedianPopulationStddevAndPercentiles) {
  const std::vector<double> percentiles = {50, 90};
  Distribution d = Summarize({9, 2, 4, 4, 5, 4, 5, 7}, percentiles);
  EXPECT_EQ(d.count, 8u);
  EXPECT_DOUBLE_EQ(d.mean, 5);
  EXPECT_DOUBLE_EQ(d.median, 4.5);
  EXPECT_DOUBLE_EQ(d.stddev, 2);  // the textbook example: population, not sample
  // Sorted: 2 4 4 4 5 5 7 9; p90 at rank 6.3: 7 + 0.3 * 2.
  EXPECT_THAT(d.percentiles, ElementsAre(Pair(50, 4.5), Pair(90, DoubleNear(7.6, 1e-12))));

  d = Summarize({}, percentiles);
  EXPECT_EQ(d.count, 0u);
  EXPECT_EQ(d.mean, 0);
  EXPECT_THAT(d.percentiles, ElementsAre(Pair(50, 0), Pair(90, 0)));
}

TEST(TpotTest, ExcludesTheFirstToken) {
  RequestResult r;
  r.success = true;
  r.output_tokens = 11;
  r.ttft_s = 0.2;
  r.e2el_s = 1.2;
  EXPECT_DOUBLE_EQ(Tpot(r), 0.1);  // (1.2 - 0.2) / (11 - 1)
  r.output_tokens = 1;
  EXPECT_EQ(Tpot(r), 0);
  r.output_tokens = 0;
  EXPECT_EQ(Tpot(r), 0);
}

TEST(StreamClockTest, RecordsFirstTokenAndGaps) {
  const BenchClock::time_point t0{};
  StreamClock clock(t0);
  clock.OnContent(t0 + std::chrono::milliseconds(300));
  clock.OnContent(t0 + std::chrono::milliseconds(320));
  clock.OnContent(t0 + std::chrono::milliseconds(370));
  RequestResult r;
  clock.Finish(t0 + std::chrono::milliseconds(400), &r);
  EXPECT_EQ(clock.content_chunks(), 3);
  EXPECT_NEAR(r.ttft_s, 0.3, 1e-12);
  EXPECT_THAT(r.itl_s, ElementsAre(DoubleNear(0.02, 1e-12), DoubleNear(0.05, 1e-12)));
  EXPECT_NEAR(r.e2el_s, 0.4, 1e-12);

  StreamClock silent(t0);
  silent.Finish(t0 + std::chrono::milliseconds(90), &r);
  EXPECT_NEAR(r.ttft_s, 0.09, 1e-12);
  EXPECT_TRUE(r.itl_s.empty());
}

TEST(ParseTest, PercentilesAndGoodputSpecs) {
  auto p = ParsePercentiles("50, 90,99.9");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(*p, ElementsAre(50, 90, 99.9));
  EXPECT_THAT(ParsePercentiles("50,abc").status().message(), HasSubstr("--percentiles"));
  EXPECT_FALSE(ParsePercentiles("0").ok());
  EXPECT_FALSE(ParsePercentiles("101").ok());
  EXPECT_FALSE(ParsePercentiles("").ok());

  auto slos = ParseGoodput({"ttft:200", "e2el:1500.5"});
  ASSERT_TRUE(slos.ok()) << slos.status();
  EXPECT_EQ(slos->ttft_ms, 200);
  EXPECT_FALSE(slos->tpot_ms.has_value());
  EXPECT_EQ(slos->e2el_ms, 1500.5);
  EXPECT_THAT(ParseGoodput({"itl:5"}).status().message(), HasSubstr("unknown metric 'itl'"));
  EXPECT_THAT(ParseGoodput({"ttft"}).status().message(), HasSubstr("--goodput"));
  EXPECT_FALSE(ParseGoodput({"ttft:-1"}).ok());
  EXPECT_TRUE(ParseGoodput({}).value().empty());
}

RequestResult Done(double ttft, double e2el, int64_t out, std::vector<double> itl = {}) {
  RequestResult r;
  r.success = true;
  r.prompt_len = 10;
  r.output_tokens = out;
  r.ttft_s = ttft;
  r.itl_s = std::move(itl);
  r.e2el_s = e2el;
  return r;
}

TEST(GoodputTest, CountsRequestsMeetingEveryObjective) {
  std::vector<RequestResult> results = {
      Done(0.100, 1.000, 10),  // TPOT 100 ms
      Done(0.300, 0.600, 4),   // TTFT too slow
      Done(0.050, 2.050, 11),  // TPOT 200 ms: too slow
      Done(0.150, 0.150, 1),   // one token: TPOT 0
      Done(0.010, 0.510, 6),   // E2EL 510 ms
  };
  RequestResult failed = Done(0.001, 0.002, 0);
  failed.success = false;
  failed.error = "HTTP 503";
  results.push_back(failed);  // fast, but failed requests are never good

  SloTargets slos;
  slos.ttft_ms = 200;
  slos.tpot_ms = 150;
  EXPECT_TRUE(MeetsSlos(results[0], slos));
  EXPECT_FALSE(MeetsSlos(results[1], slos));
  EXPECT_FALSE(MeetsSlos(results[2], slos));
  EXPECT_TRUE(MeetsSlos(results[3], slos));
  EXPECT_TRUE(MeetsSlos(results[4], slos));
  EXPECT_FALSE(MeetsSlos(results[5], slos));
  const std::vector<double> pct = {99};
  BenchMetrics m = ComputeMetrics(results, 2.0, pct, slos);
  EXPECT_EQ(m.good_requests, 3);
  EXPECT_DOUBLE_EQ(*m.request_goodput, 1.5);

  slos.e2el_ms = 600;  // the E2EL objective adds a condition: the first one fails it
  m = ComputeMetrics(results, 2.0, pct, slos);
  EXPECT_EQ(m.good_requests, 2);
  EXPECT_FALSE(ComputeMetrics(results, 2.0, pct, SloTargets{}).request_goodput.has_value());
}

TEST(ComputeMetricsTest, TotalsThroughputsAndDistributions) {
  std::vector<RequestResult> results = {
      Done(0.1, 0.5, 5, {0.1, 0.1, 0.1, 0.1}),
      Done(0.3, 0.3, 1),
      Done(0.2, 1.2, 3, {0.4, 0.6}),
  };
  results[0].prompt_tokens = 12;  // the server's count wins over the dataset's 10
  results[0].cached_tokens = 8;
  results[0].start_s = 0;
  results[0].end_s = 0.5;
  results[1].start_s = 0.4;
  results[1].end_s = 0.7;
  results[2].start_s = 0.6;
  results[2].end_s = 1.8;
  RequestResult failed;
  failed.error = "x";
  failed.start_s = 0.45;
  failed.end_s = 0.46;
  results.push_back(failed);

  const std::vector<double> pct = {50, 99};
  BenchMetrics m = ComputeMetrics(results, 2.0, pct, {});
  EXPECT_EQ(m.completed, 3);
  EXPECT_EQ(m.failed, 1);
  EXPECT_EQ(m.total_input_tokens, 12 + 10 + 10);
  EXPECT_EQ(m.total_output_tokens, 9);
  EXPECT_EQ(m.total_cached_tokens, 8);
  EXPECT_DOUBLE_EQ(m.request_throughput, 1.5);
  EXPECT_DOUBLE_EQ(m.output_throughput, 4.5);
  EXPECT_DOUBLE_EQ(m.total_token_throughput, 20.5);
  EXPECT_EQ(m.peak_concurrency, 3);  // at 0.45: the first, second and failed one
  EXPECT_DOUBLE_EQ(m.ttft_ms.mean, 200);
  EXPECT_DOUBLE_EQ(m.ttft_ms.median, 200);
  // TPOT only over requests with more than one token: 100 and 500 ms.
  EXPECT_EQ(m.tpot_ms.count, 2u);
  EXPECT_DOUBLE_EQ(m.tpot_ms.mean, 300);
  // ITLs pooled over requests: 100 x4, 400, 600.
  EXPECT_EQ(m.itl_ms.count, 6u);
  EXPECT_NEAR(m.itl_ms.mean, 1400.0 / 6.0, 1e-9);
  EXPECT_NEAR(m.itl_ms.median, 100, 1e-9);
  EXPECT_NEAR(m.itl_ms.percentiles[1].second, 400 + 0.95 * 200, 1e-9);  // rank 4.95
  EXPECT_DOUBLE_EQ(m.e2el_ms.median, 500);
}

TEST(PeakConcurrencyTest, BackToBackRequestsDoNotOverlap) {
  std::vector<RequestResult> results(3);
  results[0].start_s = 0;
  results[0].end_s = 1;
  results[1].start_s = 1;  // starts the instant the first ends
  results[1].end_s = 2;
  results[2].start_s = 1.5;
  results[2].end_s = 3;
  EXPECT_EQ(PeakConcurrency(results), 2);
  EXPECT_EQ(PeakConcurrency({}), 0);
}

}  // namespace
}  // namespace baton::tools
