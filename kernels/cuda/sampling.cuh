// Sampling on the GPU, as the CPU sampler does it (engine/sampler.h): the logit
// processors, the random draws from the same counter-based generator
// (kernels/counter_rng.h), and the token choice itself (temperature, top-k, top-p, min-p)
// from the same code (kernels/sampling_core.h), so that a seed gives the same tokens on
// both where the logits agree:
//
//   ProcessAndSampleTokens(logits, vocab, n, processors, params, seeds, steps, uniforms,
//                          scratch, ids, stream);  // scratch: SampleTokensScratchBytes
//
// Logprobs are not computed here.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/sampling_core.h"

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

// Device scratch for SampleTokens: sampling::ScratchBytes(vocab) per sequence (about 2 MiB
// at vocab 128256), side by side.
size_t SampleTokensScratchBytes(int64_t vocab, int num_seqs);

// ids[s] = the token SequenceSampler::Sample chooses from row s of `logits` (vocab each,
// processed: NaN already -inf and the processors applied, as ProcessLogits leaves them),
// with params[s] and the uniform draw uniforms[s] (CounterUniform(seed, step)):
// sampling::ChooseToken, the CPU sampler's own code, so the same row and draw give the
// same id, bit for bit in every sum. `params` and `uniforms` are device arrays of num_seqs;
// `scratch` is SampleTokensScratchBytes(vocab, num_seqs) of device memory, 16-byte aligned.
//
// One block of one thread per sequence runs the choice sequentially, as the CPU does: the
// double sums must keep the CPU's order of additions. That thread walks the row a few
// times, so sequences run in parallel but each takes milliseconds or more at vocab ~128k
// (not measured yet: gpu_sampling_test's SampleTokensCost prints it; docs/sampling.md).
cudaError_t SampleTokens(const float* logits, int64_t vocab, int num_seqs,
                         const sampling::ChoiceParams* params, const double* uniforms,
                         void* scratch, int32_t* ids, cudaStream_t stream);

// What SequenceSampler::Sample does to choose, in one call chain: ProcessLogits (NaN ->
// -inf and the processors, in place on `logits`), CounterUniforms (seeds[s], steps[s] ->
// uniforms[s], a device array of num_seqs this writes), then SampleTokens.
cudaError_t ProcessAndSampleTokens(float* logits, int64_t vocab, int num_seqs,
                                   const DeviceLogitProcessors& processors,
                                   const sampling::ChoiceParams* params, const uint64_t* seeds,
                                   const uint64_t* steps, double* uniforms, void* scratch,
                                   int32_t* ids, cudaStream_t stream);

// out[i] = sampling::Exp(x[i]) for i < n: the choice's exponential on the device, for
// checking its bits against the host's (tests/gpu/sampling_test.cc).
cudaError_t SamplingExps(const float* x, int64_t n, float* out, cudaStream_t stream);

}  // namespace baton::kernels::cuda
