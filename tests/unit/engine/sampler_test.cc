// The sampling pipeline against hand-computed references and empirical distributions.
#include "engine/sampler.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "grammar/json_schema.h"
#include "grammar/token_vocab.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace baton::engine {
namespace {

SamplingParams Params(double temperature) {
  SamplingParams p;
  p.temperature = temperature;
  return p;
}

std::vector<float> RandomLogits(size_t n, uint32_t seed, float scale = 4.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<float> LogitsFromProbs(const std::vector<double>& probs) {
  std::vector<float> v;
  v.reserve(probs.size());
  for (double p : probs) v.push_back(static_cast<float>(std::log(p)));
  return v;
}

// Draws `seeds` x `steps` tokens (penalties off, so Accept does not change the logits).
std::vector<int64_t> Histogram(const SamplingParams& params, const std::vector<float>& logits,
                               int seeds = 200, int steps = 100) {
  std::vector<int64_t> counts(logits.size());
  for (int s = 0; s < seeds; ++s) {
    SequenceSampler sampler(params, {}, 1000 + s);
    for (int t = 0; t < steps; ++t) {
      int32_t id = sampler.Sample(logits).id;
      ++counts.at(id);
      sampler.Accept(id);
    }
  }
  return counts;
}

// Softmax of logits / T over `kept`, zero elsewhere.
std::vector<double> Renormalised(const std::vector<float>& logits, double temperature,
                                 const std::set<int32_t>& kept) {
  std::vector<double> p(logits.size());
  double max = -INFINITY, total = 0;
  for (int32_t id : kept) max = std::max(max, double{logits[id]});
  for (int32_t id : kept) total += p[id] = std::exp((logits[id] - max) / temperature);
  for (double& x : p) x /= total;
  return p;
}

// Every draw inside `kept`, and the frequencies within a chi-square bound of `expected`.
void ExpectDistribution(const std::vector<int64_t>& counts, const std::vector<double>& expected,
                        const std::set<int32_t>& kept) {
  int64_t n = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  double chi2 = 0;
  for (size_t id = 0; id < counts.size(); ++id) {
    if (!kept.count(static_cast<int32_t>(id))) {
      EXPECT_EQ(counts[id], 0) << "token " << id << " is outside the kept set";
      continue;
    }
    double e = expected[id] * static_cast<double>(n);
    chi2 += (counts[id] - e) * (counts[id] - e) / e;
  }
  // Degrees of freedom <= 9 here; 30 is far beyond p = 0.001 for any of them, while a
  // wrong distribution over 20000 draws gives hundreds or more.
  EXPECT_LT(chi2, 30.0) << "frequencies do not follow the renormalised distribution";
}

TEST(SamplerTest, GreedyIsArgmaxWithTiesToLowestId) {
  std::vector<float> logits = {0.1f, 2.0f, 1.5f, 2.0f, -7.0f};
  for (uint64_t seed = 0; seed < 50; ++seed) {
    SequenceSampler sampler(Params(0), {}, seed);
    for (int t = 0; t < 5; ++t) {
      EXPECT_EQ(sampler.Sample(logits).id, 1);
      sampler.Accept(1);
    }
  }
  std::vector<float> big = RandomLogits(152064, 7);
  SequenceSampler sampler(Params(0), {}, 1);
  EXPECT_EQ(sampler.Sample(big).id, std::max_element(big.begin(), big.end()) - big.begin());
}

TEST(SamplerTest, SmallTemperatureApproachesGreedy) {
  std::vector<float> logits = RandomLogits(5000, 3);
  const int32_t argmax = std::max_element(logits.begin(), logits.end()) - logits.begin();
  for (double t : {1e-3, 1e-6, 1e-30, 1e-300, 5e-324}) {
    for (uint64_t seed = 0; seed < 100; ++seed) {
      SequenceSampler sampler(Params(t), {}, seed);
      ASSERT_EQ(sampler.Sample(logits).id, argmax) << "temperature " << t;
    }
  }
}

TEST(SamplerTest, TopKOneEqualsGreedy) {
  for (uint32_t trial = 0; trial < 20; ++trial) {
    std::vector<float> logits = RandomLogits(3000, trial);
    if (trial % 2) logits[2999] = logits[17] = *std::max_element(logits.begin(), logits.end());
    SamplingParams p = Params(1.3);
    p.top_k = 1;
    SequenceSampler greedy(Params(0), {}, trial), top1(p, {}, trial);
    ASSERT_EQ(top1.Sample(logits).id, greedy.Sample(logits).id);
  }
}

TEST(SamplerTest, TopKKeepsTheKHighest) {
  std::vector<float> logits = RandomLogits(100, 11, 1.0f);
  SamplingParams p = Params(0.8);
  p.top_k = 5;
  std::vector<int32_t> ids(100);
  std::iota(ids.begin(), ids.end(), 0);
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  std::set<int32_t> kept(ids.begin(), ids.begin() + 5);
  ExpectDistribution(Histogram(p, logits), Renormalised(logits, 0.8, kept), kept);
}

TEST(SamplerTest, TopKBreaksTiesAtTheBoundaryByLowerId) {
  std::vector<float> logits = {1.0f, 3.0f, 2.0f, 2.0f, 2.0f, 0.0f};
  SamplingParams p = Params(1.0);
  p.top_k = 3;
  std::set<int32_t> kept = {1, 2, 3};
  ExpectDistribution(Histogram(p, logits), Renormalised(logits, 1.0, kept), kept);
}

TEST(SamplerTest, TopPKeepsTheSmallestPrefixReachingP) {
  // Ids shuffled so that id order and probability order differ.
  std::vector<float> logits = LogitsFromProbs({0.1, 0.3, 0.05, 0.4, 0.15});
  SamplingParams p = Params(1.0);
  p.top_p = 0.65;  // 0.4 < 0.65 <= 0.4 + 0.3
  std::set<int32_t> kept = {3, 1};
  ExpectDistribution(Histogram(p, logits), Renormalised(logits, 1.0, kept), kept);
  p.top_p = 0.8;  // 0.7 < 0.8 <= 0.85
  kept = {3, 1, 4};
  ExpectDistribution(Histogram(p, logits), Renormalised(logits, 1.0, kept), kept);
  p.top_p = 0.01;  // the most likely token alone
  kept = {3};
  ExpectDistribution(Histogram(p, logits, 20, 20), Renormalised(logits, 1.0, kept), kept);
}

TEST(SamplerTest, TopPAppliesAfterTemperatureAndTopK) {
  std::vector<float> logits = LogitsFromProbs({0.1, 0.3, 0.05, 0.4, 0.15});
  SamplingParams p = Params(2.0);
  p.top_k = 3;  // {3, 1, 4}
  // At T = 2 the kept probabilities are proportional to sqrt: .632, .548, .387 of 1.567.
  p.top_p = 0.7;  // .404 < .7 <= .753
  std::set<int32_t> kept = {3, 1};
  ExpectDistribution(Histogram(p, logits), Renormalised(logits, 2.0, kept), kept);
}

TEST(SamplerTest, MinPDropsTokensBelowItsShareOfTheMaximum) {
  std::vector<float> logits = LogitsFromProbs({0.15, 0.5, 0.1, 0.25});
  SamplingParams p = Params(1.0);
  p.min_p = 0.25;  // threshold 0.125
  std::set<int32_t> kept = {0, 1, 3};
  ExpectDistribution(Histogram(p, logits), Renormalised(logits, 1.0, kept), kept);
  p.min_p = 0.45;  // threshold 0.225, with top-p on the path that sorts
  p.top_p = 0.99;
  kept = {1, 3};
  ExpectDistribution(Histogram(p, logits), Renormalised(logits, 1.0, kept), kept);
  p.min_p = 1.0;
  kept = {1};
  ExpectDistribution(Histogram(p, logits, 20, 20), Renormalised(logits, 1.0, kept), kept);
}

// The same pipeline with a full sort and plain running sums, to check the sampler's radix
// select and blocked sums: the kept tokens in id order, and their unnormalised
// probabilities. The two sum in different orders, so they could disagree on a draw that
// lands within rounding (~1e-12) of a boundary; with these fixed inputs none does.
struct Kept {
  std::vector<int32_t> ids;
  std::vector<float> prob;
};

Kept ReferenceKept(const std::vector<float>& w, const SamplingParams& p) {
  const size_t n = w.size();
  float max = *std::max_element(w.begin(), w.end());
  const float inv_t = static_cast<float>(std::min(1.0 / p.temperature, double{FLT_MAX}));
  Kept kept;
  kept.prob.resize(n);
  for (size_t i = 0; i < n; ++i) kept.prob[i] = std::exp((w[i] - max) * inv_t);
  const std::vector<float>& prob = kept.prob;
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int32_t a, int32_t b) { return w[a] > w[b] || (w[a] == w[b] && a < b); });
  size_t keep = p.top_k > 0 ? std::min<size_t>(n, p.top_k) : n;
  double total = 0;
  for (size_t j = 0; j < keep; ++j) total += prob[order[j]];
  double cum = 0;
  for (size_t j = 0; j < keep && p.top_p < 1.0; ++j) {
    cum += prob[order[j]];
    if (cum >= p.top_p * total) {
      keep = j + 1;
      break;
    }
  }
  for (size_t j = 0; j < keep; ++j) {
    if (prob[order[j]] >= static_cast<float>(p.min_p)) kept.ids.push_back(order[j]);
  }
  std::sort(kept.ids.begin(), kept.ids.end());
  return kept;
}

int32_t ReferenceDraw(const Kept& kept, double u) {
  double total = 0;
  for (int32_t id : kept.ids) total += kept.prob[id];
  double cum = 0;
  for (int32_t id : kept.ids) {
    cum += kept.prob[id];
    if (cum > u * total) return id;
  }
  return kept.ids.back();
}

TEST(SamplerTest, LargeVocabularyMatchesAFullSort) {
  // Flat logits at a high temperature put the top-p boundary thousands of tokens deep,
  // past the sampler's first sorted prefixes.
  std::vector<float> logits = RandomLogits(152064, 5, 1.0f);
  struct Config {
    double temperature, top_p, min_p;
    int64_t top_k;
  };
  for (Config c : {Config{1.5, 0.9, 0, 0}, Config{1.0, 0.3, 0, 0}, Config{0.7, 0.95, 0.01, 0},
                   Config{1.0, 0.9, 0, 5000}, Config{1.0, 1.0, 0.05, 40}}) {
    SamplingParams p = Params(c.temperature);
    p.top_p = c.top_p;
    p.min_p = c.min_p;
    p.top_k = c.top_k;
    const Kept kept = ReferenceKept(logits, p);
    for (uint64_t seed = 0; seed < 8; ++seed) {
      SequenceSampler sampler(p, {}, seed);
      for (int t = 0; t < 3; ++t) {
        int32_t got = sampler.Sample(logits).id;
        ASSERT_EQ(got, ReferenceDraw(kept, CounterUniform(seed, t)))
            << "T=" << c.temperature << " top_p=" << c.top_p << " top_k=" << c.top_k;
        sampler.Accept(got);
      }
    }
  }
}

TEST(SamplerTest, PenaltiesFollowTheirFormulas) {
  std::vector<float> raw = {2.0f, -1.0f, 0.5f, -3.0f, 1.0f, 0.0f, 4.0f};
  SamplingParams p = Params(1.0);
  p.repetition_penalty = 1.5;
  p.presence_penalty = 0.5;
  p.frequency_penalty = 0.25;
  p.logit_bias = {{0, 1.0f}, {4, -2.0f}};
  const std::vector<int32_t> prompt = {0, 1, 0, 0};
  SequenceSampler sampler(p, prompt, 1);
  for (int32_t id : {2, 2, 3, 6}) sampler.Accept(id);

  std::vector<double> want(raw.begin(), raw.end());
  // logit_bias on the raw logits.
  want[0] += 1.0;
  want[4] -= 2.0;
  // Repetition over distinct prompt and output tokens {0, 1, 2, 3, 6}: divide positive
  // logits, multiply negative ones, once per token however often it occurs.
  for (int id : {0, 1, 2, 3, 6}) want[id] = want[id] > 0 ? want[id] / 1.5 : want[id] * 1.5;
  // Presence and frequency over output tokens only: 2 twice, 3 and 6 once.
  want[2] -= 0.5 + 0.25 * 2;
  want[3] -= 0.5 + 0.25;
  want[6] -= 0.5 + 0.25;

  std::vector<float> got = raw;
  sampler.ApplyLogitProcessors(got);
  for (size_t i = 0; i < raw.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << "token " << i;
}

TEST(SamplerTest, RepetitionPenaltyAppliesToPromptButPresenceDoesNot) {
  std::vector<float> raw = {1.0f, 1.0f, 1.0f};
  SamplingParams p = Params(0);
  p.presence_penalty = 1.0;
  SequenceSampler presence(p, std::vector<int32_t>{0}, 1);
  std::vector<float> got = raw;
  presence.ApplyLogitProcessors(got);
  EXPECT_EQ(got, raw);  // the prompt does not count

  p = Params(0);
  p.repetition_penalty = 2.0;
  SequenceSampler repetition(p, std::vector<int32_t>{0}, 1);
  got = raw;
  repetition.ApplyLogitProcessors(got);
  EXPECT_EQ(got, (std::vector<float>{0.5f, 1.0f, 1.0f}));
  EXPECT_EQ(repetition.Sample(raw).id, 1);  // greedy sees the penalised logits
}

TEST(SamplerTest, RebuiltSamplerContinuesTheSameSequence) {
  // A preempted and recomputed sequence, or one handed from a prefill to a decode worker.
  SamplingParams p = Params(0.9);
  p.top_p = 0.9;
  p.repetition_penalty = 1.3;
  p.frequency_penalty = 0.7;
  std::vector<float> logits = RandomLogits(2000, 9, 2.0f);
  std::vector<int32_t> prompt = {5, 6, 7};
  SequenceSampler first(p, prompt, 42);
  std::vector<int32_t> out;
  for (int t = 0; t < 40; ++t) {
    out.push_back(first.Sample(logits).id);
    first.Accept(out.back());
  }
  SequenceSampler rebuilt(p, prompt, 42, std::span(out).first(25));
  EXPECT_EQ(rebuilt.step(), 25);
  for (int t = 25; t < 40; ++t) {
    int32_t id = rebuilt.Sample(logits).id;
    ASSERT_EQ(id, out[t]) << "step " << t;
    rebuilt.Accept(id);
  }
}

TEST(SamplerTest, LogitBiasBansAndForces) {
  std::vector<float> logits(10, 0.0f);
  SamplingParams p = Params(1.0);
  p.logit_bias = {{3, -100.0f}};
  std::vector<int64_t> counts = Histogram(p, logits, 50, 100);
  EXPECT_EQ(counts[3], 0);
  p.logit_bias = {{7, 100.0f}};
  counts = Histogram(p, logits, 50, 100);
  EXPECT_EQ(counts[7], 5000);
}

std::vector<int32_t> Generate(uint64_t seed, const std::vector<float>& logits, int n) {
  SequenceSampler sampler(Params(1.0), {}, seed);
  std::vector<int32_t> out;
  for (int t = 0; t < n; ++t) {
    out.push_back(sampler.Sample(logits).id);
    sampler.Accept(out.back());
  }
  return out;
}

TEST(SamplerTest, SameSeedSameTokensDifferentSeedsDiffer) {
  std::vector<float> logits = RandomLogits(1000, 1, 0.5f);
  std::set<std::vector<int32_t>> distinct;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    std::vector<int32_t> a = Generate(seed, logits, 32);
    EXPECT_EQ(a, Generate(seed, logits, 32));
    distinct.insert(a);
  }
  EXPECT_EQ(distinct.size(), 20u);
}

TEST(SamplerTest, DrawDependsOnlyOnSeedAndStep) {
  std::vector<float> logits = RandomLogits(1000, 2, 0.5f);
  std::vector<int32_t> alone = Generate(77, logits, 16);
  // Interleave with other sequences, as in a batch that changes every step.
  std::vector<SequenceSampler> others;
  SequenceSampler mine(Params(1.0), {}, 77);
  std::vector<int32_t> batched;
  for (int t = 0; t < 16; ++t) {
    others.emplace_back(Params(1.0), std::vector<int32_t>{}, 1000 + t);
    for (auto& o : others) o.Accept(o.Sample(logits).id);
    int32_t id = mine.Sample(logits).id;
    EXPECT_EQ(mine.Sample(logits).id, id) << "Sample before Accept must repeat";
    batched.push_back(id);
    mine.Accept(id);
  }
  EXPECT_EQ(batched, alone);
  EXPECT_EQ(CounterUniform(77, 3), CounterUniform(77, 3));
  EXPECT_NE(CounterUniform(77, 3), CounterUniform(77, 4));
  EXPECT_NE(CounterUniform(77, 3), CounterUniform(78, 3));
}

TEST(SamplerTest, CounterUniformIsUniform) {
  // Ten bins over 100k (seed, step) pairs, consecutive seeds included.
  std::vector<int64_t> bins(10);
  for (uint64_t seed = 0; seed < 1000; ++seed) {
    for (uint64_t step = 0; step < 100; ++step) {
      double u = CounterUniform(seed, step);
      ASSERT_GE(u, 0.0);
      ASSERT_LT(u, 1.0);
      ++bins[static_cast<size_t>(u * 10)];
    }
  }
  double chi2 = 0;
  for (int64_t b : bins) chi2 += (b - 10000.0) * (b - 10000.0) / 10000.0;
  EXPECT_LT(chi2, 30.0);
}

TEST(SamplerTest, RandomSeedsDiffer) {
  std::set<uint64_t> seeds;
  for (int i = 0; i < 1000; ++i) seeds.insert(RandomSeed());
  EXPECT_EQ(seeds.size(), 1000u);
}

std::vector<double> LogSoftmax(const std::vector<float>& logits) {
  double max = *std::max_element(logits.begin(), logits.end()), sum = 0;
  for (float x : logits) sum += std::exp(x - max);
  std::vector<double> out;
  out.reserve(logits.size());
  for (float x : logits) out.push_back(x - max - std::log(sum));
  return out;
}

TEST(SamplerTest, LogprobsAreTheRawLogSoftmax) {
  std::vector<float> logits = RandomLogits(32000, 4, 3.0f);
  logits[100] = logits[200] = 30.0f;  // a tie at the top goes to the lower id first
  std::vector<double> want = LogSoftmax(logits);
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });

  // Bias, penalties and temperature change what is sampled, not the reported logprobs.
  SamplingParams p = Params(0.5);
  p.logprobs = 5;
  p.logit_bias = {{100, -50.0f}};
  p.repetition_penalty = 1.2;
  SequenceSampler sampler(p, std::vector<int32_t>{1, 2, 3}, 3);
  for (int t = 0; t < 5; ++t) {
    SampledToken token = sampler.Sample(logits);
    EXPECT_NEAR(token.logprob, want[token.id], 1e-5);
    ASSERT_EQ(token.top_logprobs.size(), 5u);
    for (size_t j = 0; j < 5; ++j) {
      EXPECT_EQ(token.top_logprobs[j].first, order[j]);
      EXPECT_NEAR(token.top_logprobs[j].second, want[order[j]], 1e-5);
    }
    EXPECT_EQ(token.top_logprobs[0].first, 100);
    EXPECT_EQ(token.top_logprobs[1].first, 200);
    sampler.Accept(token.id);
  }

  p.logprobs = 0;
  SampledToken only = SequenceSampler(p, {}, 3).Sample(logits);
  EXPECT_NEAR(only.logprob, want[only.id], 1e-5);
  EXPECT_TRUE(only.top_logprobs.empty());

  p.logprobs = -1;
  SampledToken none = SequenceSampler(p, {}, 3).Sample(logits);
  EXPECT_TRUE(std::isnan(none.logprob));
  EXPECT_TRUE(none.top_logprobs.empty());
}

// A padded vocabulary: rows 200 and on have no token. They are never drawn, even where
// they hold the largest logits, and the logprobs are those of the first 200 alone: as if
// the logits had been cut there.
TEST(SamplerTest, AVocabLimitCutsThePaddedRows) {
  std::vector<float> logits = RandomLogits(256, 9, 2.0f);
  for (size_t id = 200; id < logits.size(); ++id) logits[id] = 20.0f;  // would win
  const std::vector<float> cut(logits.begin(), logits.begin() + 200);
  for (const double temperature : {0.0, 1.0, 3.0}) {
    SamplingParams p = Params(temperature);
    p.logprobs = 4;
    for (int seed = 0; seed < 40; ++seed) {
      SequenceSampler limited(p, {}, seed);
      limited.set_vocab_limit(200);
      SequenceSampler oracle(p, {}, seed);  // the same draws over the cut logits
      for (int t = 0; t < 5; ++t) {
        const SampledToken got = limited.Sample(logits);
        const SampledToken want = oracle.Sample(cut);
        ASSERT_EQ(got.id, want.id) << "temperature " << temperature << " seed " << seed;
        EXPECT_EQ(got.logprob, want.logprob);
        EXPECT_EQ(got.top_logprobs, want.top_logprobs);
        limited.Accept(got.id);
        oracle.Accept(want.id);
      }
    }
    // Without the limit the padded rows are what a draw takes.
    EXPECT_GE(SequenceSampler(p, {}, 1).Sample(logits).id, 200);
  }
  // A limit past the logits changes nothing.
  SequenceSampler wide(Params(0), {}, 1);
  wide.set_vocab_limit(1000);
  EXPECT_GE(wide.Sample(logits).id, 200);
}

TEST(SamplerTest, NonFiniteLogitsAreNeverSampled) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> logits = {nan, 0.0f, -INFINITY, 0.5f, nan};
  SamplingParams p = Params(1.0);
  std::vector<int64_t> counts = Histogram(p, logits, 20, 50);
  EXPECT_EQ(counts[0] + counts[2] + counts[4], 0);
  EXPECT_GT(counts[1], 0);
  EXPECT_GT(counts[3], 0);
  SequenceSampler greedy(Params(0), {}, 1);
  EXPECT_EQ(greedy.Sample(logits).id, 3);
}

}  // namespace
}  // namespace baton::engine

namespace baton::engine {
namespace {

// The flat lists a GPU applies (kernels/logit_processors.h) give the bits the sampler's
// own processors give, sequence by sequence in one batch.
TEST(SamplerTest, LogitProcessorListsApplyWhatTheSamplerApplies) {
  const int vocab = 300;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uni(-5.0f, 5.0f);
  std::vector<SamplingParams> params(4);
  params[0].logit_bias = {{3, 2.5f}, {299, -100.0f}, {3, 1.0f}, {vocab + 7, 4.0f}};  // 3 twice
  params[1].repetition_penalty = 1.3;
  params[2].presence_penalty = 0.7;
  params[2].frequency_penalty = -0.4;
  params[3] = params[0];
  params[3].repetition_penalty = 0.8;
  params[3].frequency_penalty = 1.5;
  const std::vector<int32_t> prompt = {1, 5, 5, 9, 250, vocab + 3};
  const std::vector<int32_t> outputs = {9, 9, 12, 250, 7};
  kernels::LogitProcessorLists lists;
  std::vector<std::vector<float>> want;
  for (const SamplingParams& p : params) {
    const SequenceSampler sampler(p, prompt, /*seed=*/1, outputs);
    sampler.AppendLogitProcessors(&lists);
    std::vector<float> logits(vocab);
    for (float& x : logits) x = uni(rng);
    want.push_back(logits);
    sampler.ApplyLogitProcessors(want.back());
  }
  ASSERT_EQ(lists.num_seqs(), 4);
  // The same logits again (the rng replays), through the lists.
  rng.seed(11);
  for (int s = 0; s < lists.num_seqs(); ++s) {
    std::vector<float> logits(vocab);
    for (float& x : logits) x = uni(rng);
    const std::vector<float> before = logits;
    kernels::ApplyLogitProcessorLists(lists, s, logits);
    for (int i = 0; i < vocab; ++i) ASSERT_EQ(logits[i], want[s][i]) << "seq " << s << " id " << i;
    EXPECT_NE(logits, before) << "seq " << s << ": its processors changed nothing";
  }
}

// A constrained sampler over a vocabulary of one token per byte plus an EOS: whatever the
// logits, the text is a document of the grammar, and EOS comes only once it is complete.
// The logits may be shorter or longer than the grammar's vocabulary (a padded model, a
// tokenizer with more ids than the model samples).
TEST(ConstrainedSamplerTest, OutputsAreDocumentsForAnyLogitsLength) {
  std::vector<std::string> bytes;
  std::vector<bool> special;
  for (int b = 0; b < 256; ++b) {
    bytes.emplace_back(1, static_cast<char>(b));
    special.push_back(false);
  }
  bytes.emplace_back("</s>");
  special.push_back(true);
  const int32_t eos = 256;
  auto vocab = grammar::MakeTokenVocab(bytes, special);
  ASSERT_TRUE(vocab.ok());
  auto compiled = grammar::CompileJsonSchema(
      R"({"type": "object", "properties": {"k": {"type": "boolean"}}, "required": ["k"]})");
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  auto bound = grammar::TokenGrammar::Create(*compiled, *vocab);
  ASSERT_TRUE(bound.ok());
  for (size_t logits_size : {size_t{257}, size_t{300}, size_t{250}}) {
    for (uint64_t seed = 1; seed <= 20; ++seed) {
      SamplingParams params;
      params.temperature = 1.0;
      SequenceSampler sampler(params, {}, seed);
      ASSERT_TRUE(sampler.Constrain(*bound, {eos}, {}).ok());
      std::mt19937 rng(static_cast<uint32_t>(seed));
      std::normal_distribution<float> noise(0.0f, 3.0f);
      std::string text;
      bool ended = false;
      for (int step = 0; step < 64 && !ended; ++step) {
        std::vector<float> logits(logits_size);
        for (float& x : logits) x = noise(rng);
        const int32_t id = sampler.Sample(logits).id;
        sampler.Accept(id);
        if (id == eos) {
          ended = true;
        } else {
          ASSERT_LT(id, 256);
          text.push_back(static_cast<char>(id));
        }
      }
      if (!ended) continue;  // 64 steps of whitespace-free JSON end long before; still
      const nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
      ASSERT_TRUE(doc.is_object()) << text << " (logits " << logits_size << ")";
      EXPECT_TRUE(doc["k"].is_boolean()) << text;
    }
  }
}

}  // namespace
}  // namespace baton::engine
