// The kernels of one GPU forward step that ops.cuh does not have, in the shapes
// kernels::GpuOps (kernels/gpu_ops.h) asks for: bf16 rows out of the norms and SwiGLU
// for the matrix multiplies, an embedding of a vocabulary-parallel shard, RoPE over
// strided q/k rows with angles looked up by position, and the small elementwise steps.
// Framework-free, as the others: raw device pointers, shapes and a stream; each returns
// the launch's cudaError_t (cudaErrorInvalidValue for a shape it does not take, without
// launching). No call allocates or synchronizes, so each can be captured in a CUDA graph.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace baton::kernels::cuda {

// out[t] = table[ids[t] - first_row] as f32, dim wide, when that row is one of the table's
// `rows`; else a row of zeros (a vocabulary-parallel rank holds rows [first_row,
// first_row + rows) and the other ranks' rows sum in later).
cudaError_t EmbedBf16(const __nv_bfloat16* table, int64_t rows, int64_t first_row, int dim,
                      const int32_t* ids, int tokens, float* out, cudaStream_t stream);

// out[r] = bf16(x[r] / sqrt(mean(x[r]^2) + eps) * weight), rounded to nearest even, for
// `rows` rows of n; the reduction tree of ops.cuh's RmsNorm (rms_norm.cuh).
cudaError_t RmsNormBf16(const float* x, const float* weight, int rows, int n, float eps,
                        __nv_bfloat16* out, cudaStream_t stream);
// residual[r] += x[r]; out[r] = RmsNormBf16(residual[r]).
cudaError_t AddRmsNormBf16(float* residual, const float* x, const float* weight, int rows, int n,
                           float eps, __nv_bfloat16* out, cudaStream_t stream);

// out[i] = x[rows[i]] for `count` rows of n floats.
cudaError_t GatherRows(const float* x, int n, const int32_t* rows, int count, float* out,
                       cudaStream_t stream);

// residual[i] += x[i] for i < n.
cudaError_t AddInPlace(float* residual, const float* x, int64_t n, cudaStream_t stream);

// out[r][j] += bias[j] for `rows` rows of n (a linear layer's bias).
cudaError_t AddBias(float* out, const float* bias, int rows, int n, cudaStream_t stream);

// out[i] = bf16(x[i]), rounded to nearest even.
cudaError_t ToBf16(const float* x, int64_t n, __nv_bfloat16* out, cudaStream_t stream);

// RoPE in place on each of `tokens` rows of qkv (row_stride floats apart): the q_heads +
// kv_heads heads of head_dim (even) at the row's start (the query heads, then the key
// heads). Token t turns by the angles of position positions[t], whose cos and sin are
// cos_table / sin_table [position][head_dim / 2]. `interleaved` pairs x[2i] with x[2i+1]
// (GGUF llama); otherwise x[i] with x[i + head_dim/2] (HF).
cudaError_t RopeQk(float* qkv, int tokens, int64_t row_stride, int q_heads, int kv_heads,
                   int head_dim, const int32_t* positions, const float* cos_table,
                   const float* sin_table, bool interleaved, cudaStream_t stream);

// out[r][i] = bf16(silu(gate_up[r][i]) * gate_up[r][inter + i]) for `rows` rows: gate_up
// holds each row's gate projection, then its up projection (one fused matrix multiply).
cudaError_t SwiGluBf16(const float* gate_up, int rows, int inter, __nv_bfloat16* out,
                       cudaStream_t stream);

}  // namespace baton::kernels::cuda
