// Per-token elementwise kernels of a Llama block. Each works on one row at a time, so
// a token's result never depends on the other rows of the batch.
#pragma once

#include <cstdint>

#include "kernels/cpu/bf16.h"

namespace baton::cpu {

// out = x / sqrt(mean(x^2) + eps) * weight, over n elements. out may alias x.
void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out);

// Rotates `num_heads` heads of `head_dim` each, in place, by the angles pos*inv_freq[i]
// given as cos/sin tables of head_dim/2 entries. `interleaved` pairs x[2i] with x[2i+1]
// (GGUF llama); otherwise x[i] pairs with x[i + head_dim/2] (HF rotate_half).
void ApplyRope(float* x, int64_t num_heads, int64_t head_dim, const float* cos, const float* sin,
               bool interleaved);

// out[i] = silu(gate[i]) * up[i]. out may alias gate.
void SwiGlu(const float* gate, const float* up, int64_t n, float* out);

// x[i] += y[i].
void AddInPlace(float* x, const float* y, int64_t n);

// A dot product with one fixed summation order (8 interleaved partial sums, then a fixed
// tree), independent of the caller and the data around it.
float Dot(const float* a, const float* b, int64_t n);
// The same with b in bf16 (widened exactly): the same order, so it equals Dot over b's
// values as floats.
float Dot(const float* a, const Bf16* b, int64_t n);

}  // namespace baton::cpu
