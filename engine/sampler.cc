#include "engine/sampler.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
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

absl::Status SequenceSampler::Constrain(std::shared_ptr<const grammar::TokenGrammar> grammar,
                                        std::vector<int32_t> end_ids,
                                        std::span<const int32_t> output_ids) {
  auto matcher = std::make_unique<grammar::GrammarMatcher>(std::move(grammar));
  for (size_t i = 0; i < output_ids.size(); ++i) {
    const int32_t id = output_ids[i];
    if (std::find(end_ids.begin(), end_ids.end(), id) != end_ids.end()) continue;
    absl::Status accepted = matcher->Accept(id);
    if (!accepted.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("output_ids[", i, "] (token ", id,
                       ") leaves the request's grammar: ", accepted.message()));
    }
  }
  matcher_ = std::move(matcher);
  end_ids_ = std::move(end_ids);
  return absl::OkStatus();
}

void SequenceSampler::ApplyGrammarMask() {
  const size_t vocab = work_.size();
  const size_t grammar_vocab = std::min(vocab, static_cast<size_t>(matcher_->vocab_size()));
  // Sized by the grammar's vocabulary (the tokenizer's), which the logits may be cut below.
  mask_.assign((static_cast<size_t>(matcher_->vocab_size()) + 31) / 32, 0);
  if (!matcher_->MustEnd()) matcher_->FillMask(mask_);
  // The grammar never allows an end id (a special token): their logits are kept aside.
  end_logits_.clear();
  for (int32_t id : end_ids_) {
    const bool in = id >= 0 && static_cast<size_t>(id) < vocab;
    end_logits_.push_back(in ? work_[id] : kNegInf);
  }
  bool any = false;  // some allowed token has a finite logit
  for (size_t base = 0; base < vocab; base += 32) {
    const size_t end = std::min(vocab, base + 32);
    uint32_t bits = base < grammar_vocab ? mask_[base / 32] : 0;
    if (end > grammar_vocab && base < grammar_vocab) bits &= (1u << (grammar_vocab - base)) - 1;
    // Whole words first: most are all refused (or, inside a string, all allowed).
    if (bits == 0) {
      std::fill(work_.begin() + base, work_.begin() + end, kNegInf);
      continue;
    }
    for (size_t i = base; i < end; ++i) {
      if (((bits >> (i - base)) & 1u) == 0) {
        work_[i] = kNegInf;
      } else {
        any = any || work_[i] > kNegInf;
      }
    }
  }
  // The end ids: allowed once the document is complete. With no way on (a grammar that
  // allows nothing more, or only tokens the model gives -inf), the sequence ends rather
  // than pick a token the grammar refuses.
  const bool may_end = matcher_->CanEnd() || !any;
  bool end_in_vocab = false;
  for (int32_t id : end_ids_)
    end_in_vocab = end_in_vocab || (id >= 0 && static_cast<size_t>(id) < vocab);
  // No way on and no end id in the logits (a model without EOS): the first token rather
  // than no token at all, which the choice below cannot make.
  if (!any && !end_in_vocab) work_[0] = 0.0f;
  for (size_t k = 0; k < end_ids_.size(); ++k) {
    const int32_t id = end_ids_[k];
    if (id < 0 || static_cast<size_t>(id) >= vocab) continue;
    if (!may_end) {
      work_[id] = kNegInf;
    } else {
      work_[id] = !any && !(end_logits_[k] > kNegInf) ? 0.0f : end_logits_[k];
    }
  }
}

void SequenceSampler::Accept(int32_t token) {
  if (matcher_ != nullptr && std::find(end_ids_.begin(), end_ids_.end(), token) == end_ids_.end()) {
    // Sample chose it from the mask, so it is allowed; a caller that accepts another token
    // (a resumed sequence's replay) has checked it against the grammar already.
    (void)matcher_->Accept(token);
  }
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
  if (matcher_ != nullptr) ApplyGrammarMask();

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
