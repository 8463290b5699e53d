#include "engine/sampler.h"

#include <atomic>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "common/check.h"
#include "kernels/counter_rng.h"
#include "kernels/sampling_core.h"

namespace baton::engine {
namespace {

using kernels::kGolden;
using kernels::Mix64;
namespace sampling = kernels::sampling;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

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

SampledToken SequenceSampler::Sample(std::span<const float> all_logits) {
  std::span<const float> logits = all_logits;
  if (vocab_limit_ >= 0 && static_cast<size_t>(vocab_limit_) < logits.size()) {
    logits = logits.first(static_cast<size_t>(vocab_limit_));
  }
  BATON_CHECK(!logits.empty());
  work_.resize(logits.size());
  // A NaN from the model must not poison the comparisons below; it is never sampled.
  // Written as a comparison (NaN compares false) rather than std::isnan: the same values,
  // and one maxss per entry.
  for (size_t i = 0; i < logits.size(); ++i) {
    const float x = logits[i];
    work_[i] = x > kNegInf ? x : kNegInf;
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
  // The choice itself is kernels/sampling_core.h, which the GPU runs too: for the same
  // processed logits and u both choose the same id.
  const size_t vocab = work_.size();
  const int32_t id = sampling::ChooseToken(
      work_.data(), vocab, choice_params(), u,
      sampling::ScratchAt(scratch_.Get(sampling::ScratchBytes(vocab)), vocab));
  BATON_CHECK(id >= 0);
  return id;
}

void SequenceSampler::FillLogprobs(std::span<const float> logits, SampledToken* out) const {
  const sampling::Normaliser z = sampling::SoftmaxNormaliser(logits.data(), logits.size());
  const double log_z = static_cast<double>(z.max) + std::log(z.sum);
  auto logprob = [&](int32_t id) {
    return static_cast<float>(static_cast<double>(logits[id]) - log_z);
  };
  out->logprob = logprob(out->id);

  const size_t n = static_cast<size_t>(params_.logprobs);
  if (n == 0) return;
  std::vector<int32_t> best(n);
  best.resize(sampling::TopLogits(logits.data(), logits.size(), n, best.data()));
  out->top_logprobs.reserve(best.size());
  for (int32_t id : best) out->top_logprobs.emplace_back(id, logprob(id));
}

}  // namespace baton::engine
