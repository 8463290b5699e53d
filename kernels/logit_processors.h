// A batch's logit processors as flat lists, the form a GPU kernel takes them in: for
// sequence s, entries offsets[s] .. offsets[s+1] of each list. Filled from each
// sequence's sampler (engine::SequenceSampler::AppendLogitProcessors), applied by
// kernels/cuda/sampling.cuh on the GPU and by ApplyLogitProcessorLists below on the host;
// both apply, per sequence and in this order, what SequenceSampler::ApplyLogitProcessors
// does, with the same float operations.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace baton::kernels {

struct LogitProcessorLists {
  // logit_bias, in the request's order (an id may repeat: each adds): logit += value.
  std::vector<int32_t> bias_offsets = {0}, bias_ids;
  std::vector<float> bias_values;
  // The repetition penalty (one per sequence, 1: none) over distinct seen ids:
  // logit = logit < 0 ? logit * penalty : logit / penalty.
  std::vector<float> repetition_penalty;
  std::vector<int32_t> seen_offsets = {0}, seen_ids;
  // Presence and frequency penalties over distinct output ids, as one float each:
  // logit -= value.
  std::vector<int32_t> penalty_offsets = {0}, penalty_ids;
  std::vector<float> penalty_values;

  int num_seqs() const { return static_cast<int>(repetition_penalty.size()); }
};

// Applies sequence `seq`'s processors to its logits; ids outside them are ignored.
inline void ApplyLogitProcessorLists(const LogitProcessorLists& p, int seq,
                                     std::span<float> logits) {
  const int64_t vocab = static_cast<int64_t>(logits.size());
  const auto in_vocab = [vocab](int32_t id) { return id >= 0 && id < vocab; };
  for (int32_t i = p.bias_offsets[seq]; i < p.bias_offsets[seq + 1]; ++i) {
    if (in_vocab(p.bias_ids[i])) logits[p.bias_ids[i]] += p.bias_values[i];
  }
  const float penalty = p.repetition_penalty[seq];
  for (int32_t i = p.seen_offsets[seq]; i < p.seen_offsets[seq + 1]; ++i) {
    if (!in_vocab(p.seen_ids[i])) continue;
    float& x = logits[p.seen_ids[i]];
    x = x < 0 ? x * penalty : x / penalty;
  }
  for (int32_t i = p.penalty_offsets[seq]; i < p.penalty_offsets[seq + 1]; ++i) {
    if (in_vocab(p.penalty_ids[i])) logits[p.penalty_ids[i]] -= p.penalty_values[i];
  }
}

}  // namespace baton::kernels
