// The counter-based generator behind sampling, written once for the CPU and CUDA: the
// uniform draw a sequence uses at output position `step` is a pure function of its seed
// and `step`, so a seed draws the same on both backends, in any batch, after preemption
// and across a prefill/decode split (engine/sampler.h). Header-only; nvcc compiles the
// same code for the device.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define BATON_HOST_DEVICE __host__ __device__
#else
#define BATON_HOST_DEVICE
#endif

namespace baton::kernels {

inline constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

// SplitMix64's output function: a bijection on 64 bits with full avalanche.
BATON_HOST_DEVICE inline uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A double in [0, 1) with 53 random bits. The seed is mixed first so that nearby seeds
// (0, 1, 2...) do not give sequences that are shifted copies of each other, as plain
// SplitMix64 states seed + k * kGolden would.
BATON_HOST_DEVICE inline double CounterUniform(uint64_t seed, uint64_t step) {
  const uint64_t z = Mix64(Mix64(seed) + (step + 1) * kGolden);
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

}  // namespace baton::kernels
