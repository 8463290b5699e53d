// kernels/sampling_core.h run directly on the host, as the GPU runs it: the same ids as
// SequenceSampler::Sample over rows with NaNs, ties, infinities, huge and tiny values and a
// grid of parameters (tests/gpu/sampling_test.cc checks the GPU against the same sampler),
// all within ScratchBytes, whatever the scratch held before; and its exponential within an
// ulp of e^x with its bits pinned, so that a host build whose arithmetic differs (a fused
// multiply-add) fails here, not only against a GPU.
#include "kernels/sampling_core.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/sampling_rows.h"

namespace baton::kernels::sampling {
namespace {

uint32_t Bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof(b));
  return b;
}

float FromBits(uint32_t b) {
  float x;
  std::memcpy(&x, &b, sizeof(x));
  return x;
}

using ::baton::testing::kRowKinds;
using ::baton::testing::MakeRow;
using ::baton::testing::RowKind;

// What SequenceSampler::Sample hands the choice: NaN turned to -inf, then the processors.
std::vector<float> Processed(const engine::SequenceSampler& sampler, std::vector<float> row) {
  for (float& x : row) x = std::isnan(x) ? -INFINITY : x;
  sampler.ApplyLogitProcessors(row);
  return row;
}

// The grid of the GPU test, one draw per cell: temperature x top_k x top_p x min_p x
// processors, each with its own seed and step.
void ExpectSamplersChoice(int vocab, const std::vector<RowKind>& kinds) {
  std::mt19937_64 rng(vocab);
  // One scratch reused, as the sampler and the GPU reuse theirs, and overwritten with NaN
  // bytes before each choice: nothing may be read before it is written. Exactly
  // ScratchBytes long, so that the sanitizer build catches any access past it.
  const size_t bytes = ScratchBytes(vocab);
  std::unique_ptr<std::byte[]> scratch(new std::byte[bytes]);
  int checked = 0;
  for (RowKind kind : kinds) {
    const std::vector<float> row = MakeRow(kind, vocab, static_cast<uint32_t>(rng()));
    for (double t : {0.0, 0.3, 1.0, 2.0}) {
      for (int64_t k : {int64_t{0}, int64_t{1}, int64_t{40}, int64_t{vocab - 1}}) {
        for (double top_p : {1.0, 0.9, 0.5, 1e-6}) {
          for (double min_p : {0.0, 0.05}) {
            for (bool processors : {false, true}) {
              engine::SamplingParams p;
              p.temperature = t;
              p.top_k = k;
              p.top_p = top_p;
              p.min_p = min_p;
              if (processors) {
                p.logit_bias = {{7, 2.5f}, {11, -100.0f}, {7, 1.5f}, {vocab + 3, 1.0f}};
                p.repetition_penalty = 1.3;
                p.presence_penalty = 0.4;
                p.frequency_penalty = 0.2;
              }
              const std::vector<int32_t> prompt = {1, 5, 5, 9, static_cast<int32_t>(rng() % vocab)};
              std::vector<int32_t> outputs(rng() % 40);
              for (size_t i = 0; i < outputs.size(); ++i) {
                outputs[i] = static_cast<int32_t>(rng() % (i % 3 == 0 ? 16 : vocab));
              }
              engine::SequenceSampler sampler(p, prompt, rng(), outputs);
              const std::vector<float> processed = Processed(sampler, row);
              std::memset(scratch.get(), 0xFF, bytes);
              const int32_t got = ChooseToken(
                  processed.data(), processed.size(), sampler.choice_params(),
                  engine::CounterUniform(sampler.seed(), static_cast<uint64_t>(sampler.step())),
                  ScratchAt(scratch.get(), vocab));
              const int32_t want = sampler.Sample(row).id;
              ASSERT_EQ(got, want) << "vocab " << vocab << " kind " << static_cast<int>(kind)
                                   << " T=" << t << " top_k=" << k << " top_p=" << top_p
                                   << " min_p=" << min_p << " processors=" << processors;
              ASSERT_GE(got, 0);
              ASSERT_LT(got, vocab);
              ASSERT_FALSE(std::isnan(row[got])) << "a NaN logit was chosen";
              ++checked;
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(checked, static_cast<int>(kinds.size()) * 256);
}

TEST(SamplingCoreTest, ChooseTokenIsTheSamplersChoice) {
  ExpectSamplersChoice(32000, std::vector<RowKind>(std::begin(kRowKinds), std::end(kRowKinds)));
}

// At Llama 3's vocabulary, the row that fills every radix group with the whole vocabulary:
// the most scratch the choice touches. (One row kind only: each grid takes ~20 s under
// ASan at -O0, ~0.6 s in release.)
TEST(SamplingCoreTest, ChooseTokenIsTheSamplersChoiceAtALlama3Vocabulary) {
  ExpectSamplersChoice(128256, {RowKind::kAllEqual});
}

// Every array within ScratchBytes, on small and odd vocabularies and the rows that fill the
// radix groups (all keys equal) or keep a single token.
TEST(SamplingCoreTest, ScratchStaysWithinItsBytes) {
  constexpr size_t kGuard = 512;
  for (int vocab : {1, 2, 7, 255, 256, 257, 1000, 4099}) {
    const ScratchLayout l = ScratchLayoutFor(vocab);
    EXPECT_EQ(l.bytes % 256, 0u);
    const size_t offsets[] = {l.mass, l.count, l.blocks, l.probs, l.keys, l.cand, l.group};
    for (size_t o : offsets) EXPECT_EQ(o % 16, 0u);
    EXPECT_LE(l.count, l.blocks);
    EXPECT_GE(l.count - l.mass, kRadixBuckets * sizeof(double));
    EXPECT_GE(l.blocks - l.count, kRadixBuckets * sizeof(uint32_t));
    EXPECT_GE(l.probs - l.blocks, CdfBlocks(vocab) * sizeof(double));
    EXPECT_GE(l.keys - l.probs, vocab * sizeof(float));
    EXPECT_GE(l.cand - l.keys, vocab * sizeof(uint32_t));
    EXPECT_GE(l.group - l.cand, vocab * sizeof(int32_t));
    EXPECT_GE(l.bytes - l.group, vocab * sizeof(int32_t));

    std::vector<std::byte> buffer(l.bytes + kGuard, std::byte{0xA5});
    const Scratch s = ScratchAt(buffer.data(), vocab);
    std::vector<std::vector<float>> rows = {std::vector<float>(vocab, 1.0f),
                                            std::vector<float>(vocab, -INFINITY)};
    rows.push_back(rows[0]);
    rows.back()[vocab - 1] = 2.0f;
    std::mt19937 rng(vocab);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    rows.emplace_back(vocab);
    for (float& x : rows.back()) x = normal(rng);
    for (const std::vector<float>& row : rows) {
      for (double top_p : {1.0, 0.999999, 0.5, 1e-9}) {
        for (int64_t top_k : {int64_t{0}, int64_t{1}, int64_t{vocab - 1}, int64_t{vocab}}) {
          ChoiceParams p;
          p.top_k = top_k;
          p.top_p = top_p;
          p.min_p = 0.01;
          for (double u : {0.0, 0.5, 0x1.fffffffffffffp-1}) {
            const int32_t id = ChooseToken(row.data(), row.size(), p, u, s);
            ASSERT_GE(id, 0);
            ASSERT_LT(id, vocab);
          }
        }
      }
    }
    for (size_t i = l.bytes; i < buffer.size(); ++i) {
      ASSERT_EQ(buffer[i], std::byte{0xA5}) << "vocab " << vocab << ": wrote byte " << i;
    }
  }
}

TEST(SamplingCoreTest, GreedyIsTheFirstMaximumAndTheFallbackForInfinities) {
  std::vector<std::byte> buffer(ScratchBytes(6));
  const Scratch s = ScratchAt(buffer.data(), 6);
  ChoiceParams greedy;
  greedy.temperature = 0;
  ChoiceParams hot;
  hot.temperature = 5;
  const std::vector<float> ties = {1.0f, 3.0f, -2.0f, 3.0f, 3.0f, 0.0f};
  EXPECT_EQ(ChooseToken(ties.data(), ties.size(), greedy, 0.99, s), 1);
  const std::vector<float> inf = {1.0f, 3.0f, INFINITY, 3.0f, INFINITY, 0.0f};
  EXPECT_EQ(ChooseToken(inf.data(), inf.size(), hot, 0.99, s), 2);  // nothing to normalise by
  const std::vector<float> none(6, -INFINITY);
  EXPECT_EQ(ChooseToken(none.data(), none.size(), hot, 0.99, s), 0);
  // The maximum alone has weight 1 and survives every filter: min_p = 1 keeps only it.
  ChoiceParams strict = hot;
  strict.min_p = 1.0;
  const std::vector<float> row = {0.5f, 2.0f, 1.9f, -1.0f, 1.99f, 0.0f};
  for (double u : {0.0, 0.3, 0.999}) EXPECT_EQ(ChooseToken(row.data(), 6, strict, u, s), 1);
}

// The exponential: within one ulp of e^x (usually the correctly rounded value), exact at the
// edges the choice relies on, and with pinned bits: those of IEEE arithmetic rounding every
// operation, which the device's code gives too (tests/gpu/sampling_test.cc). A host whose
// arithmetic differs (flushing subnormals, as -ffast-math does; x87 excess precision; a
// changed table or polynomial) fails here. The same hash with gcc and clang, -O0 to -O3,
// with and without -march=native.
TEST(SamplingCoreTest, ExpIsWithinAnUlpAndItsBitsArePinned) {
  EXPECT_EQ(Exp(0.0f), 1.0f);  // the maximum's probability, exactly
  EXPECT_EQ(Exp(-0.0f), 1.0f);
  EXPECT_EQ(Exp(-INFINITY), 0.0f);
  EXPECT_TRUE(std::isnan(Exp(NAN)));
  EXPECT_EQ(Exp(-104.0f), 0.0f);
  EXPECT_EQ(Exp(-103.9f), FromBits(1));  // the smallest subnormal
  EXPECT_EQ(Exp(89.0f), INFINITY);
  EXPECT_EQ(Exp(INFINITY), INFINITY);
  EXPECT_TRUE(std::isfinite(Exp(88.7f)));

  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a over the result bits
  size_t n = 0, correctly_rounded = 0;
  for (uint32_t b = 0x80000000u; b <= 0xC2D00000u; b += 1009) {  // [-104, 0] descending
    const float x = FromBits(b);
    const float got = Exp(x);
    const float want = static_cast<float>(std::exp(static_cast<double>(x)));
    const int64_t ulps = static_cast<int64_t>(Bits(got)) - static_cast<int64_t>(Bits(want));
    ASSERT_LE(std::abs(ulps), 1) << std::hexfloat << "Exp(" << x << ") = " << got << ", e^x "
                                 << want;
    correctly_rounded += ulps == 0;
    ++n;
    hash = (hash ^ Bits(got)) * 0x100000001b3ull;
  }
  EXPECT_GT(static_cast<double>(correctly_rounded), 0.999 * static_cast<double>(n));
  EXPECT_EQ(hash, 0xf3478bfef4ade1d1ull) << "over " << n << " arguments";
}

// Logprobs' helpers against a sort and a double-precision sum.
TEST(SamplingCoreTest, TopLogitsAndTheNormaliserMatchASortAndASum) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(5000);
  for (float& x : logits) x = std::round(normal(rng) * 2.0f) / 2.0f;  // many ties
  logits[10] = logits[20] = NAN;
  logits[30] = -INFINITY;
  std::vector<int32_t> order;
  for (int32_t i = 0; i < static_cast<int32_t>(logits.size()); ++i) {
    if (!std::isnan(logits[i])) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  for (size_t n : {size_t{0}, size_t{1}, size_t{5}, size_t{20}, logits.size() + 3}) {
    std::vector<int32_t> best(n);
    best.resize(TopLogits(logits.data(), logits.size(), n, best.data()));
    const std::vector<int32_t> want(order.begin(), order.begin() + std::min(n, order.size()));
    EXPECT_EQ(best, want) << "n = " << n;
  }

  const Normaliser z = SoftmaxNormaliser(logits.data(), logits.size());
  double max = -INFINITY, sum = 0;
  for (float x : logits) max = std::isnan(x) ? max : std::max(max, static_cast<double>(x));
  for (float x : logits) sum += std::isnan(x) ? 0.0 : std::exp(x - max);
  EXPECT_EQ(static_cast<double>(z.max), max);
  EXPECT_NEAR(z.sum, sum, 1e-7 * sum);
}

}  // namespace
}  // namespace baton::kernels::sampling
