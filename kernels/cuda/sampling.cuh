// Sampling on the GPU, as the CPU sampler does it (engine/sampler.h): the logit
// processors, greedy choice, and the random draws from the same counter-based generator
// (kernels/counter_rng.h), so that a seed draws the same on both. Temperature, top-k,
// top-p and min-p are not here yet.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace baton::kernels::cuda {

// out[i] = CounterUniform(seeds[i], steps[i]) for i < n: one draw per sequence of a step.
cudaError_t CounterUniforms(const uint64_t* seeds, const uint64_t* steps, int n, double* out,
                            cudaStream_t stream);

// kernels/logit_processors.h's lists on the device: the same fields, as device pointers.
struct DeviceLogitProcessors {
  const int32_t* bias_offsets = nullptr;  // num_seqs + 1
  const int32_t* bias_ids = nullptr;
  const float* bias_values = nullptr;
  const float* repetition_penalty = nullptr;  // num_seqs
  const int32_t* seen_offsets = nullptr;      // num_seqs + 1
  const int32_t* seen_ids = nullptr;
  const int32_t* penalty_offsets = nullptr;  // num_seqs + 1
  const int32_t* penalty_ids = nullptr;
  const float* penalty_values = nullptr;
};

// For each of num_seqs rows of `logits` (vocab each), in place: NaN becomes -inf, then
// the sequence's processors apply as ApplyLogitProcessorLists does (bias entries one
// after another, since an id may repeat; the penalties' ids are distinct, so in parallel).
cudaError_t ProcessLogits(float* logits, int64_t vocab, int num_seqs,
                          const DeviceLogitProcessors& processors, cudaStream_t stream);

// ids[s] = the first id holding row s's maximum (ties go to the lowest id; NaN never wins),
// as the CPU sampler's greedy choice; vocab where no entry compares (an all-NaN row).
cudaError_t GreedyTokens(const float* logits, int64_t vocab, int num_seqs, int32_t* ids,
                         cudaStream_t stream);

}  // namespace baton::kernels::cuda
