// The per-token elementwise kernels of a Llama block on the GPU, the counterparts of
// kernels/cpu/ops.h. Framework-free, as FlashInfer's: raw device pointers, shapes and a
// stream; the caller checks the returned cudaError_t (common/cuda_status.h).
//
// Each row is one block with a fixed reduction tree, so a token's result never depends on
// how many rows run with it (the engine's batch invariance, docs/engine.md).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace baton::kernels::cuda {

// out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight, for `rows` rows of n. out may alias x.
cudaError_t RmsNorm(const float* x, const float* weight, int rows, int n, float eps, float* out,
                    cudaStream_t stream);

// The residual add fused with the next norm: residual[r] += x[r], then out[r] =
// RmsNorm(residual[r]). out may alias x, not residual.
cudaError_t AddRmsNorm(float* residual, const float* x, const float* weight, int rows, int n,
                       float eps, float* out, cudaStream_t stream);

// Rotates `num_heads` heads of head_dim (even) for each of `tokens` rows of x, in place.
// cos and sin hold head_dim / 2 angles per token, [tokens][head_dim / 2]. `interleaved`
// pairs x[2i] with x[2i+1] (GGUF llama); otherwise x[i] with x[i + head_dim/2] (HF).
cudaError_t ApplyRope(float* x, int tokens, int num_heads, int head_dim, const float* cos,
                      const float* sin, bool interleaved, cudaStream_t stream);

// out[i] = silu(gate[i]) * up[i]. out may alias gate.
cudaError_t SwiGlu(const float* gate, const float* up, int64_t n, float* out, cudaStream_t stream);

enum class RowType { kF32, kF16, kBf16 };

// out[t] = table[ids[t]] as f32, dim wide, for `tokens` ids. An id outside [0, rows)
// writes a row of NaN, so that a bad id the host failed to refuse cannot pass unseen.
cudaError_t EmbeddingGather(const void* table, RowType type, int64_t rows, int dim,
                            const int32_t* ids, int tokens, float* out, cudaStream_t stream);

}  // namespace baton::kernels::cuda
