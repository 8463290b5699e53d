// Sampling on the GPU. Today: the random draws, from the same counter-based generator as
// the CPU sampler (kernels/counter_rng.h), so that a seed draws the same on both.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace baton::kernels::cuda {

// out[i] = CounterUniform(seeds[i], steps[i]) for i < n: one draw per sequence of a step.
cudaError_t CounterUniforms(const uint64_t* seeds, const uint64_t* steps, int n, double* out,
                            cudaStream_t stream);

}  // namespace baton::kernels::cuda
