#include "engine/sampler.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cfloat>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "common/check.h"
#include "kernels/counter_rng.h"

namespace baton::engine {
namespace {

using sampler_internal::RadixScratch;

using kernels::kGolden;
using kernels::Mix64;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Maps a logit to an unsigned key that sorts in descending logit order. -0 and +0 share
// one key, as they compare equal.
uint32_t DescendingKey(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x + 0.0f);
  const uint32_t ascending = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  return ~ascending;
}

// The last token of a prefix in (key, id) order.
struct Boundary {
  uint32_t key;
  int32_t id;
};

bool InPrefix(uint32_t key, int32_t id, Boundary b) {
  return key < b.key || (key == b.key && id <= b.id);
}

// The last candidate of the shortest prefix, in (logit descending, id) order, whose weight
// reaches `target`; the last candidate of all when none does (rounding at top_p ~ 1).
// `candidates` are in id order and non-empty. A radix select on the 32-bit keys: three
// histogram passes over ever smaller groups replace a sort of up to ~150k tokens. The
// weight before the boundary is summed by buckets, not token by token in sorted order:
// deterministic, and equal to the sorted running sum up to rounding.
template <typename Weight>
Boundary SelectPrefix(std::span<const int32_t> candidates, const uint32_t* keys, Weight weight,
                      double target, RadixScratch* s) {
  constexpr int kShift[3] = {21, 10, 0};
  constexpr uint32_t kMask[3] = {0x7FF, 0x7FF, 0x3FF};
  std::span<const int32_t> group = candidates;
  std::vector<int32_t>* next = &s->group_a;
  std::vector<int32_t>* spare = &s->group_b;
  double before = 0;
  for (int level = 0; level < 3; ++level) {
    const size_t buckets = kMask[level] + 1;
    auto bucket = [&](int32_t id) { return (keys[id] >> kShift[level]) & kMask[level]; };
    s->mass.assign(buckets, 0.0);
    s->count.assign(buckets, 0);
    for (int32_t id : group) {
      const uint32_t b = bucket(id);
      s->mass[b] += weight(id);
      ++s->count[b];
    }
    size_t chosen = buckets;
    for (size_t b = 0; b < buckets; ++b) {
      if (s->count[b] == 0) continue;
      if (before + s->mass[b] >= target) {
        chosen = b;
        break;
      }
      before += s->mass[b];
    }
    if (chosen == buckets) {
      Boundary last{keys[group.front()], group.front()};
      for (int32_t id : group) {
        if (!InPrefix(keys[id], id, last)) last = {keys[id], id};
      }
      return last;
    }
    next->clear();
    for (int32_t id : group) {
      if (bucket(id) == chosen) next->push_back(id);
    }
    group = *next;
    std::swap(next, spare);
  }
  // One key left: ties, in id order.
  const uint32_t key = keys[group.front()];
  for (int32_t id : group) {
    before += weight(id);
    if (before >= target) return {key, id};
  }
  return {key, group.back()};
}

// Reductions over ~150k logits with independent lanes: one running max or sum is bound by
// the latency of each step. The lanes combine in a fixed order, so results stay
// deterministic.
constexpr size_t kLanes = 8;

float LaneMax(std::span<const float> x) {  // NaN never wins a comparison, so it is ignored
  float m[kLanes];
  std::fill_n(m, kLanes, kNegInf);
  size_t i = 0;
  for (; i + kLanes <= x.size(); i += kLanes) {
    for (size_t l = 0; l < kLanes; ++l) m[l] = x[i + l] > m[l] ? x[i + l] : m[l];
  }
  for (; i < x.size(); ++i) m[0] = x[i] > m[0] ? x[i] : m[0];
  float max = m[0];
  for (size_t l = 1; l < kLanes; ++l) max = m[l] > max ? m[l] : max;
  return max;
}

template <typename F>
double LaneSum(size_t begin, size_t end, F f) {
  double acc[kLanes] = {};
  size_t i = begin;
  for (; i + kLanes <= end; i += kLanes) {
    for (size_t l = 0; l < kLanes; ++l) acc[l] += f(i + l);
  }
  for (; i < end; ++i) acc[0] += f(i);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// Inverse CDF over the weights p(0) .. p(n-1) in index order: the first j whose running
// sum exceeds u times the total. At least one weight must be positive. Block sums find
// the block first, so only one block is summed one weight at a time.
constexpr size_t kCdfBlock = 256;

template <typename P>
size_t InverseCdf(size_t n, P p, double u, std::vector<double>* blocks) {
  const size_t num_blocks = (n + kCdfBlock - 1) / kCdfBlock;
  blocks->resize(num_blocks);
  double total = 0;
  for (size_t b = 0; b < num_blocks; ++b) {
    total += (*blocks)[b] = LaneSum(b * kCdfBlock, std::min(n, (b + 1) * kCdfBlock), p);
  }
  const double target = u * total;
  double cum = 0;
  size_t chosen = num_blocks;
  double cum_before_chosen = 0;
  for (size_t b = 0; b < num_blocks; ++b) {
    if ((*blocks)[b] == 0) continue;
    // Ends on the last block with weight if rounding (u * total == total) carries us past.
    chosen = b;
    cum_before_chosen = cum;
    if (cum + (*blocks)[b] > target) break;
    cum += (*blocks)[b];
  }
  cum = cum_before_chosen;
  size_t last = n;
  for (size_t j = chosen * kCdfBlock; j < std::min(n, (chosen + 1) * kCdfBlock); ++j) {
    const double w = p(j);
    if (w == 0) continue;
    cum += w;
    if (cum > target) return j;
    last = j;
  }
  BATON_CHECK(last < n);
  return last;
}

}  // namespace

uint64_t RandomSeed() {
  // SplitMix64 from a random start: distinct seeds for every call, without a lock.
  static std::atomic<uint64_t> state{[] {
    std::random_device device;
    return (static_cast<uint64_t>(device()) << 32) ^ device();
  }()};
  return Mix64(state.fetch_add(kGolden, std::memory_order_relaxed));
}

double CounterUniform(uint64_t seed, uint64_t step) { return kernels::CounterUniform(seed, step); }

SequenceSampler::SequenceSampler(const SamplingParams& params, std::span<const int32_t> prompt_ids,
                                 uint64_t seed, std::span<const int32_t> output_ids)
    : params_(params), seed_(seed), step_(static_cast<int64_t>(output_ids.size())) {
  if (params_.repetition_penalty != 1.0) {
    seen_.insert(prompt_ids.begin(), prompt_ids.end());
    seen_.insert(output_ids.begin(), output_ids.end());
  }
  if (params_.presence_penalty != 0.0 || params_.frequency_penalty != 0.0) {
    for (int32_t id : output_ids) ++output_counts_[id];
  }
}

void SequenceSampler::Accept(int32_t token) {
  if (params_.repetition_penalty != 1.0) seen_.insert(token);
  if (params_.presence_penalty != 0.0 || params_.frequency_penalty != 0.0) {
    ++output_counts_[token];
  }
  ++step_;
}

void SequenceSampler::ApplyLogitProcessors(std::span<float> logits) const {
  const int64_t vocab = static_cast<int64_t>(logits.size());
  auto in_vocab = [vocab](int32_t id) { return id >= 0 && id < vocab; };
  for (const auto& [id, bias] : params_.logit_bias) {
    if (in_vocab(id)) logits[id] += bias;
  }
  if (params_.repetition_penalty != 1.0) {
    // HF's RepetitionPenaltyLogitsProcessor: once per distinct token, scaling towards
    // "less likely" whatever the logit's sign.
    const float penalty = static_cast<float>(params_.repetition_penalty);
    for (int32_t id : seen_) {
      if (!in_vocab(id)) continue;
      float& x = logits[id];
      x = x < 0 ? x * penalty : x / penalty;
    }
  }
  if (params_.presence_penalty != 0.0 || params_.frequency_penalty != 0.0) {
    for (const auto& [id, count] : output_counts_) {
      if (!in_vocab(id)) continue;
      logits[id] -= static_cast<float>(params_.frequency_penalty * count +
                                       (count > 0 ? params_.presence_penalty : 0.0));
    }
  }
}

void SequenceSampler::AppendLogitProcessors(kernels::LogitProcessorLists* lists) const {
  for (const auto& [id, bias] : params_.logit_bias) {
    lists->bias_ids.push_back(id);
    lists->bias_values.push_back(bias);
  }
  lists->bias_offsets.push_back(static_cast<int32_t>(lists->bias_ids.size()));
  lists->repetition_penalty.push_back(static_cast<float>(params_.repetition_penalty));
  if (params_.repetition_penalty != 1.0)
    lists->seen_ids.insert(lists->seen_ids.end(), seen_.begin(), seen_.end());
  lists->seen_offsets.push_back(static_cast<int32_t>(lists->seen_ids.size()));
  if (params_.presence_penalty != 0.0 || params_.frequency_penalty != 0.0) {
    for (const auto& [id, count] : output_counts_) {
      lists->penalty_ids.push_back(id);
      lists->penalty_values.push_back(static_cast<float>(
          params_.frequency_penalty * count + (count > 0 ? params_.presence_penalty : 0.0)));
    }
  }
  lists->penalty_offsets.push_back(static_cast<int32_t>(lists->penalty_ids.size()));
}

SampledToken SequenceSampler::Sample(std::span<const float> logits) {
  BATON_CHECK(!logits.empty());
  work_.resize(logits.size());
  // A NaN from the model must not poison the comparisons below; it is never sampled.
  for (size_t i = 0; i < logits.size(); ++i) {
    const float x = logits[i];
    work_[i] = std::isnan(x) ? kNegInf : x;
  }
  ApplyLogitProcessors(work_);

  SampledToken out;
  out.id = SampleFromProcessed(CounterUniform(seed_, static_cast<uint64_t>(step_)));
  if (params_.logprobs >= 0) {
    FillLogprobs(logits, &out);
  } else {
    out.logprob = std::numeric_limits<float>::quiet_NaN();
  }
  return out;
}

int32_t SequenceSampler::SampleFromProcessed(double u) {
  const std::vector<float>& w = work_;
  const size_t vocab = w.size();
  const float max = LaneMax(w);
  // Greedy, and the fallback when nothing is finite to normalise against. The first
  // occurrence of the maximum: ties go to the lowest id.
  if (params_.temperature == 0.0 || !std::isfinite(max)) {
    return static_cast<int32_t>(std::find(w.begin(), w.end(), max) - w.begin());
  }

  // Capped so that 0 * inv_t stays 0 for the maximum even when 1/T overflows a float.
  const float inv_t = static_cast<float>(std::min(1.0 / params_.temperature, double{FLT_MAX}));
  auto prob = [&](size_t i) { return std::exp((w[i] - max) * inv_t); };
  // Unnormalised: the maximum's probability is exp(0) = 1 exactly, so min_p's threshold
  // min_p * p_max is min_p itself, and top-p compares masses against top_p * total.
  // Clamped so that the maximum always survives, even with unvalidated params.
  const float min_p = static_cast<float>(std::min(params_.min_p, 1.0));
  probs_.resize(vocab);

  const bool top_k = params_.top_k > 0 && static_cast<size_t>(params_.top_k) < vocab;
  const bool top_p = params_.top_p < 1.0;
  if (!top_k && !top_p) {
    for (size_t i = 0; i < vocab; ++i) {
      const float p = prob(i);
      probs_[i] = p < min_p ? 0.0f : p;
    }
    return static_cast<int32_t>(InverseCdf(
        vocab, [&](size_t i) { return static_cast<double>(probs_[i]); }, u, &blocks_));
  }

  // top-k and top-p keep prefixes of one strict total order, processed logit descending
  // and ties by lower id, so what they keep is unique. Candidates stay in id order.
  keys_.resize(vocab);
  for (size_t i = 0; i < vocab; ++i) keys_[i] = DescendingKey(w[i]);
  cand_.resize(vocab);
  std::iota(cand_.begin(), cand_.end(), 0);
  auto keep_prefix = [&](Boundary b) {
    std::erase_if(cand_, [&](int32_t id) { return !InPrefix(keys_[id], id, b); });
  };
  if (top_k) {
    keep_prefix(SelectPrefix(
        cand_, keys_.data(), [](int32_t) { return 1.0; }, static_cast<double>(params_.top_k),
        &radix_));
  }
  for (int32_t id : cand_) probs_[id] = prob(id);
  if (top_p) {
    auto mass = [&](int32_t id) { return static_cast<double>(probs_[id]); };
    const double total = LaneSum(0, cand_.size(), [&](size_t j) { return mass(cand_[j]); });
    keep_prefix(SelectPrefix(cand_, keys_.data(), mass, params_.top_p * total, &radix_));
  }
  return cand_[InverseCdf(
      cand_.size(),
      [&](size_t j) {
        const float p = probs_[cand_[j]];
        return p < min_p ? 0.0 : static_cast<double>(p);
      },
      u, &blocks_)];
}

void SequenceSampler::FillLogprobs(std::span<const float> logits, SampledToken* out) const {
  const float max = LaneMax(logits);
  const double sum = LaneSum(0, logits.size(), [&](size_t i) {
    return std::isnan(logits[i]) ? 0.0 : static_cast<double>(std::exp(logits[i] - max));
  });
  const double log_z = static_cast<double>(max) + std::log(sum);
  auto logprob = [&](int32_t id) {
    return static_cast<float>(static_cast<double>(logits[id]) - log_z);
  };
  out->logprob = logprob(out->id);

  const size_t n = static_cast<size_t>(params_.logprobs);
  if (n == 0) return;
  // A running top-n (usually n <= 20) in one pass: cheaper than sorting the vocabulary.
  auto before = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  std::vector<int32_t> best;
  best.reserve(n + 1);
  for (int32_t id = 0; id < static_cast<int32_t>(logits.size()); ++id) {
    if (std::isnan(logits[id])) continue;
    if (best.size() == n && !before(id, best.back())) continue;
    best.insert(std::upper_bound(best.begin(), best.end(), id, before), id);
    if (best.size() > n) best.pop_back();
  }
  out->top_logprobs.reserve(best.size());
  for (int32_t id : best) out->top_logprobs.emplace_back(id, logprob(id));
}

}  // namespace baton::engine
