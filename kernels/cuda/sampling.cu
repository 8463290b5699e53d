#include <cstdint>

#include "kernels/counter_rng.h"
#include "kernels/cuda/sampling.cuh"
#include "kernels/sampling_core.h"

namespace baton::kernels::cuda {
namespace {

__global__ void CounterUniformsKernel(const uint64_t* seeds, const uint64_t* steps, int n,
                                      double* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = CounterUniform(seeds[i], steps[i]);
}

constexpr int kRowThreads = 256;

__global__ void ProcessLogitsKernel(float* logits, int64_t vocab, DeviceLogitProcessors p) {
  const int seq = blockIdx.x;
  float* row = logits + seq * vocab;
  for (int64_t i = threadIdx.x; i < vocab; i += kRowThreads) {
    if (isnan(row[i])) row[i] = -INFINITY;
  }
  __syncthreads();
  const auto in_vocab = [vocab](int32_t id) { return id >= 0 && id < vocab; };
  if (threadIdx.x == 0) {  // in order: the same id may be biased twice
    for (int32_t i = p.bias_offsets[seq]; i < p.bias_offsets[seq + 1]; ++i) {
      if (in_vocab(p.bias_ids[i])) row[p.bias_ids[i]] += p.bias_values[i];
    }
  }
  __syncthreads();
  const float penalty = p.repetition_penalty[seq];
  for (int32_t i = p.seen_offsets[seq] + threadIdx.x; i < p.seen_offsets[seq + 1];
       i += kRowThreads) {
    if (!in_vocab(p.seen_ids[i])) continue;
    float& x = row[p.seen_ids[i]];
    x = x < 0 ? x * penalty : x / penalty;
  }
  __syncthreads();
  for (int32_t i = p.penalty_offsets[seq] + threadIdx.x; i < p.penalty_offsets[seq + 1];
       i += kRowThreads) {
    if (in_vocab(p.penalty_ids[i])) row[p.penalty_ids[i]] -= p.penalty_values[i];
  }
}

// (value, id) with the larger value, ties to the lower id; NaN never wins.
__device__ inline void Better(float v, int64_t id, float* best, int64_t* best_id) {
  if (v > *best || (v == *best && id < *best_id)) {
    *best = v;
    *best_id = id;
  }
}

__global__ void GreedyKernel(const float* logits, int64_t vocab, int32_t* ids) {
  const int seq = blockIdx.x;
  const float* row = logits + seq * vocab;
  float best = -INFINITY;
  int64_t best_id = INT64_MAX;
  for (int64_t i = threadIdx.x; i < vocab; i += kRowThreads) Better(row[i], i, &best, &best_id);
  for (int offset = 16; offset > 0; offset /= 2) {
    const float v = __shfl_xor_sync(0xffffffffu, best, offset);
    const int64_t id = __shfl_xor_sync(0xffffffffu, best_id, offset);
    Better(v, id, &best, &best_id);
  }
  __shared__ float warp_best[kRowThreads / 32];
  __shared__ int64_t warp_id[kRowThreads / 32];
  if (threadIdx.x % 32 == 0) {
    warp_best[threadIdx.x / 32] = best;
    warp_id[threadIdx.x / 32] = best_id;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kRowThreads / 32; ++w) Better(warp_best[w], warp_id[w], &best, &best_id);
    ids[seq] = static_cast<int32_t>(best_id == INT64_MAX ? vocab : best_id);
  }
}

// One block of one thread per sequence: ChooseToken is sequential code whose double sums
// keep the CPU's order. The radix histograms, read and written most often, sit in shared
// memory; the per-token arrays in the sequence's slice of `scratch`.
__global__ void SampleTokensKernel(const float* logits, int64_t vocab,
                                   const sampling::ChoiceParams* params, const double* uniforms,
                                   char* scratch, int32_t* ids) {
  __shared__ double mass[sampling::kRadixBuckets];
  __shared__ uint32_t count[sampling::kRadixBuckets];
  const int seq = blockIdx.x;
  const size_t vocab_size = static_cast<size_t>(vocab);
  sampling::Scratch s =
      sampling::ScratchAt(scratch + seq * sampling::ScratchBytes(vocab_size), vocab_size);
  s.mass = mass;
  s.count = count;
  ids[seq] = sampling::ChooseToken(logits + seq * vocab, vocab_size, params[seq], uniforms[seq], s);
}

__global__ void SamplingExpsKernel(const float* x, int64_t n, float* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = sampling::Exp(x[i]);
}

}  // namespace

size_t SampleTokensScratchBytes(int64_t vocab, int num_seqs) {
  if (vocab <= 0 || num_seqs <= 0) return 0;
  return sampling::ScratchBytes(static_cast<size_t>(vocab)) * static_cast<size_t>(num_seqs);
}

cudaError_t SampleTokens(const float* logits, int64_t vocab, int num_seqs,
                         const sampling::ChoiceParams* params, const double* uniforms,
                         void* scratch, int32_t* ids, cudaStream_t stream) {
  if (num_seqs <= 0 || vocab <= 0) return cudaSuccess;
  // Ids are int32; scratch slices must stay 16-byte aligned.
  if (vocab > INT32_MAX || scratch == nullptr || reinterpret_cast<uintptr_t>(scratch) % 16 != 0) {
    return cudaErrorInvalidValue;
  }
  SampleTokensKernel<<<num_seqs, 1, 0, stream>>>(logits, vocab, params, uniforms,
                                                 static_cast<char*>(scratch), ids);
  return cudaGetLastError();
}

cudaError_t ProcessAndSampleTokens(float* logits, int64_t vocab, int num_seqs,
                                   const DeviceLogitProcessors& processors,
                                   const sampling::ChoiceParams* params, const uint64_t* seeds,
                                   const uint64_t* steps, double* uniforms, void* scratch,
                                   int32_t* ids, cudaStream_t stream) {
  cudaError_t status = ProcessLogits(logits, vocab, num_seqs, processors, stream);
  if (status != cudaSuccess) return status;
  status = CounterUniforms(seeds, steps, num_seqs, uniforms, stream);
  if (status != cudaSuccess) return status;
  return SampleTokens(logits, vocab, num_seqs, params, uniforms, scratch, ids, stream);
}

cudaError_t SamplingExps(const float* x, int64_t n, float* out, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  if (blocks > INT32_MAX) return cudaErrorInvalidValue;
  SamplingExpsKernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(x, n, out);
  return cudaGetLastError();
}

cudaError_t ProcessLogits(float* logits, int64_t vocab, int num_seqs,
                          const DeviceLogitProcessors& processors, cudaStream_t stream) {
  if (num_seqs <= 0 || vocab <= 0) return cudaSuccess;
  ProcessLogitsKernel<<<num_seqs, kRowThreads, 0, stream>>>(logits, vocab, processors);
  return cudaGetLastError();
}

cudaError_t GreedyTokens(const float* logits, int64_t vocab, int num_seqs, int32_t* ids,
                         cudaStream_t stream) {
  if (num_seqs <= 0 || vocab <= 0) return cudaSuccess;
  GreedyKernel<<<num_seqs, kRowThreads, 0, stream>>>(logits, vocab, ids);
  return cudaGetLastError();
}

cudaError_t CounterUniforms(const uint64_t* seeds, const uint64_t* steps, int n, double* out,
                            cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  constexpr int kThreads = 128;
  CounterUniformsKernel<<<(n + kThreads - 1) / kThreads, kThreads, 0, stream>>>(seeds, steps, n,
                                                                                out);
  return cudaGetLastError();
}

}  // namespace baton::kernels::cuda
