// Per-sequence token sampling: logit processors, temperature, top-k/top-p/min-p and the
// random draw, plus logprobs. docs/sampling.md describes the pipeline and its semantics.
//
//   SequenceSampler sampler(params, prompt_ids, params.seed.value_or(RandomSeed()));
//   while (...) {
//     SampledToken t = sampler.Sample(logits_of_this_sequence);
//     sampler.Accept(t.id);
//   }
//
// The draw for output position t depends only on (seed, t), never on a shared generator,
// so a sequence samples the same tokens whatever batch it runs in, after preemption and
// recompute, and when a prefill worker samples its first token and a decode worker the
// rest (construct the second sampler with the tokens generated so far).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "engine/sampling_params.h"
#include "grammar/grammar_matcher.h"
#include "grammar/token_grammar.h"
#include "kernels/logit_processors.h"
#include "kernels/sampling_core.h"

namespace baton::engine {

namespace sampler_internal {
// Bytes for kernels/sampling_core.h's scratch, reused across steps. Never zeroed, so the
// pages of a path a sequence never takes (top-k's candidates in a plain draw) stay
// untouched. A copy starts empty: the contents matter only within one Sample.
class ChoiceScratch {
 public:
  ChoiceScratch() = default;
  ChoiceScratch(const ChoiceScratch&) {}
  ChoiceScratch& operator=(const ChoiceScratch&) { return *this; }
  ChoiceScratch(ChoiceScratch&&) = default;
  ChoiceScratch& operator=(ChoiceScratch&&) = default;

  // At least `bytes` (16-byte aligned), kept from an earlier call when large enough.
  std::byte* Get(size_t bytes) {
    if (size_ < bytes) {
      data_ = std::make_unique_for_overwrite<std::byte[]>(bytes);
      size_ = bytes;
    }
    return data_.get();
  }

 private:
  std::unique_ptr<std::byte[]> data_;
  size_t size_ = 0;
};
}  // namespace sampler_internal

struct SampledToken {
  int32_t id = -1;
  // log-softmax of the raw model logits (before bias, penalties and temperature), as
  // vLLM's default "raw_logprobs". Only computed when params.logprobs >= 0; NaN otherwise.
  float logprob = 0;
  // The params.logprobs most likely tokens by raw logprob, descending, ties by lower id.
  std::vector<std::pair<int32_t, float>> top_logprobs;
};

// A seed from a process-wide random source, for requests that give none. Thread-safe.
uint64_t RandomSeed();

// The uniform draw in [0, 1) that a sequence with `seed` uses at output position `step`:
// a pure function of its arguments (a counter-based generator).
double CounterUniform(uint64_t seed, uint64_t step);

// Not thread-safe; one per sequence. `params` should have passed ValidateSamplingParams;
// token ids outside the logits are ignored by the processors.
class SequenceSampler {
 public:
  // `output_ids`: tokens this sequence has already generated (for a sampler rebuilt after
  // the sequence moved); sampling continues at position output_ids.size().
  SequenceSampler(const SamplingParams& params, std::span<const int32_t> prompt_ids, uint64_t seed,
                  std::span<const int32_t> output_ids = {});

  // Ids from `size` on are never chosen, nor listed in logprobs, which are normalised over
  // the ids below it: a padded vocabulary (the model's embedding has rows the tokenizer
  // has no token for, as Qwen2.5's) is cut to the tokenizer's, as vLLM cuts the logits
  // to the original vocabulary. Unset: every entry of the logits.
  void set_vocab_limit(int64_t size) { vocab_limit_ = size; }

  // Constrained decoding (docs/structured_outputs.md): from now on only tokens that keep
  // the output inside `grammar` are chosen, and `end_ids` (EOS and the stop ids) only once
  // the document is complete. `output_ids` are the tokens generated so far (as given to the
  // constructor), replayed into the grammar; InvalidArgument when they leave it.
  absl::Status Constrain(std::shared_ptr<const grammar::TokenGrammar> grammar,
                         std::vector<int32_t> end_ids, std::span<const int32_t> output_ids);
  bool constrained() const { return matcher_ != nullptr; }

  // Chooses the token for the current position from this sequence's logits (one per vocab
  // entry). Calling it again before Accept gives the same token.
  SampledToken Sample(std::span<const float> logits);

  // Records the token generated at the current position and moves to the next.
  void Accept(int32_t token);

  // Applies logit_bias, the repetition penalty and the presence/frequency penalties to
  // `logits` in place, as Sample does before temperature.
  void ApplyLogitProcessors(std::span<float> logits) const;

  // Appends this sequence's processors to a batch's lists (kernels/logit_processors.h),
  // for a backend that applies them elsewhere (the GPU): the same operations, in the
  // same order, with the same float values.
  void AppendLogitProcessors(kernels::LogitProcessorLists* lists) const;

  // True when Sample's choice is the first maximum of the raw logits and nothing else is
  // asked: temperature 0, no logprobs, no logit processors. A backend may then choose the
  // token where the logits are (model/forward_batch.h, SequenceInput::greedy).
  bool GreedyFromRawLogits() const {
    return matcher_ == nullptr && params_.temperature == 0.0 && params_.logprobs < 0 &&
           params_.logit_bias.empty() && params_.repetition_penalty == 1.0 &&
           params_.presence_penalty == 0.0 && params_.frequency_penalty == 0.0;
  }

  // What the token choice reads of the params (kernels/sampling_core.h), for a backend that
  // chooses elsewhere (the GPU's SampleTokens) with CounterUniform(seed(), step()).
  kernels::sampling::ChoiceParams choice_params() const {
    kernels::sampling::ChoiceParams choice;
    choice.temperature = params_.temperature;
    choice.top_k = params_.top_k;
    choice.top_p = params_.top_p;
    choice.min_p = params_.min_p;
    return choice;
  }

  uint64_t seed() const { return seed_; }
  // Tokens accepted so far: the output position of the next Sample.
  int64_t step() const { return step_; }

 private:
  int32_t SampleFromProcessed(double u);
  // Sets the processed logits of every token the grammar does not allow now to -inf.
  void ApplyGrammarMask();
  void FillLogprobs(std::span<const float> logits, SampledToken* out) const;

  SamplingParams params_;
  uint64_t seed_;
  int64_t step_ = 0;
  int64_t vocab_limit_ = -1;  // < 0: none
  // Distinct prompt and output tokens; kept only when repetition_penalty != 1.
  absl::flat_hash_set<int32_t> seen_;
  // Output token counts; kept only when a presence or frequency penalty is set.
  absl::flat_hash_map<int32_t, int32_t> output_counts_;

  // Scratch reused across steps so sampling a vocab of ~150k entries does not allocate.
  std::vector<float> work_;  // the processed logits
  // Constrained decoding: the sequence's place in its grammar, and the allowed-token mask.
  std::unique_ptr<grammar::GrammarMatcher> matcher_;
  std::vector<int32_t> end_ids_;
  std::vector<uint32_t> mask_;
  std::vector<float> end_logits_;
  sampler_internal::ChoiceScratch scratch_;
};

}  // namespace baton::engine
