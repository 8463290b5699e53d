// RoPE's rotation of one token's heads by one block, for the .cu files only (ops.cu's
// per-token angles and step_ops.cu's position tables both call it).
#pragma once

#include <cstdint>

namespace baton::kernels::cuda::detail {

// Rotates `heads` heads of head_dim (even) at `row` by the angles c, s (head_dim / 2 each),
// a thread per pair. `interleaved` pairs x[2i] with x[2i+1] (GGUF llama); otherwise x[i]
// with x[i + head_dim/2] (HF).
__device__ inline void RotateHeads(float* row, int heads, int head_dim, const float* c,
                                   const float* s, bool interleaved) {
  const int half = head_dim / 2;
  for (int k = threadIdx.x; k < heads * half; k += blockDim.x) {
    const int h = k / half, i = k % half;
    float* v = row + static_cast<int64_t>(h) * head_dim;
    const int ia = interleaved ? 2 * i : i, ib = interleaved ? 2 * i + 1 : i + half;
    const float a = v[ia], b = v[ib];
    v[ia] = a * c[i] - b * s[i];
    v[ib] = b * c[i] + a * s[i];
  }
}

}  // namespace baton::kernels::cuda::detail
