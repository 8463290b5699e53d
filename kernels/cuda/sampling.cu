#include "kernels/counter_rng.h"
#include "kernels/cuda/sampling.cuh"

namespace baton::kernels::cuda {
namespace {

__global__ void CounterUniformsKernel(const uint64_t* seeds, const uint64_t* steps, int n,
                                      double* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = CounterUniform(seeds[i], steps[i]);
}

}  // namespace

cudaError_t CounterUniforms(const uint64_t* seeds, const uint64_t* steps, int n, double* out,
                            cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  constexpr int kThreads = 128;
  CounterUniformsKernel<<<(n + kThreads - 1) / kThreads, kThreads, 0, stream>>>(seeds, steps, n,
                                                                                out);
  return cudaGetLastError();
}

}  // namespace baton::kernels::cuda
