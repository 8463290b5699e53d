#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>

#include "kernels/cuda/rms_norm.cuh"
#include "kernels/cuda/rope.cuh"
#include "kernels/cuda/step_ops.cuh"

namespace baton::kernels::cuda {
namespace {

using detail::kNormThreads;
using detail::RmsNormKernel;

constexpr int kThreads = 256;          // elementwise kernels
constexpr int64_t kMaxBlocks = 65535;  // grid-stride loops cover what a grid this size does not

// Blocks for an elementwise grid-stride loop over n elements.
unsigned GridFor(int64_t n) {
  return static_cast<unsigned>(std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks));
}

// Threads for a block that walks one row of `width` items: a narrow row leaves most of a
// 256-thread block idle.
int RowThreads(int64_t width) { return width < 256 ? 64 : 256; }

// A block per token: its table row as f32, or zeros when another rank holds the id.
__global__ void EmbedKernel(const __nv_bfloat16* table, int64_t rows, int64_t first_row, int dim,
                            const int32_t* ids, float* out) {
  const int64_t t = blockIdx.x;
  const int64_t local = static_cast<int64_t>(ids[t]) - first_row;
  float* dst = out + t * dim;
  if (local < 0 || local >= rows) {
    for (int i = threadIdx.x; i < dim; i += blockDim.x) dst[i] = 0.0f;
    return;
  }
  const __nv_bfloat16* src = table + local * dim;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) dst[i] = __bfloat162float(src[i]);
}

// A block per gathered row.
__global__ void GatherRowsKernel(const float* x, int n, const int32_t* rows, float* out) {
  const int64_t i = blockIdx.x;
  const float* src = x + static_cast<int64_t>(rows[i]) * n;
  float* dst = out + i * n;
  for (int j = threadIdx.x; j < n; j += blockDim.x) dst[j] = src[j];
}

__global__ void AddKernel(float* residual, const float* x, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    residual[i] += x[i];
  }
}

// total = rows * n elements of out; element i is column i % n.
__global__ void AddBiasKernel(float* out, const float* bias, int64_t total, int n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] += bias[i % n];
  }
}

__global__ void ToBf16Kernel(const float* x, int64_t n, __nv_bfloat16* out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = __float2bfloat16_rn(x[i]);
  }
}

// A block per token; a thread per rotated pair (head, i) of the token's `heads` heads.
__global__ void RopeQkKernel(float* qkv, int64_t row_stride, int heads, int head_dim,
                             const int32_t* positions, const float* cos_table,
                             const float* sin_table, bool interleaved) {
  const int64_t token = blockIdx.x;
  const int64_t angles = static_cast<int64_t>(positions[token]) * (head_dim / 2);
  detail::RotateHeads(qkv + token * row_stride, heads, head_dim, cos_table + angles,
                      sin_table + angles, interleaved);
}

// total = rows * inter outputs; output i is column i % inter of row i / inter.
__global__ void SwiGluBf16Kernel(const float* gate_up, int64_t total, int inter,
                                 __nv_bfloat16* out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / inter, j = i % inter;
    const float* row = gate_up + r * 2 * inter;
    const float g = row[j];
    // expf, as ops.cu's SwiGlu: the accurate one, not __expf.
    out[i] = __float2bfloat16_rn(g / (1.0f + expf(-g)) * row[inter + j]);
  }
}

}  // namespace

cudaError_t EmbedBf16(const __nv_bfloat16* table, int64_t rows, int64_t first_row, int dim,
                      const int32_t* ids, int tokens, float* out, cudaStream_t stream) {
  if (tokens <= 0 || dim <= 0) return cudaSuccess;
  EmbedKernel<<<tokens, RowThreads(dim), 0, stream>>>(table, rows, first_row, dim, ids, out);
  return cudaGetLastError();
}

cudaError_t RmsNormBf16(const float* x, const float* weight, int rows, int n, float eps,
                        __nv_bfloat16* out, cudaStream_t stream) {
  if (rows <= 0 || n <= 0) return cudaSuccess;
  RmsNormKernel<false, __nv_bfloat16>
      <<<rows, kNormThreads, 0, stream>>>(nullptr, x, weight, n, eps, out);
  return cudaGetLastError();
}

cudaError_t AddRmsNormBf16(float* residual, const float* x, const float* weight, int rows, int n,
                           float eps, __nv_bfloat16* out, cudaStream_t stream) {
  if (rows <= 0 || n <= 0) return cudaSuccess;
  RmsNormKernel<true, __nv_bfloat16>
      <<<rows, kNormThreads, 0, stream>>>(residual, x, weight, n, eps, out);
  return cudaGetLastError();
}

cudaError_t GatherRows(const float* x, int n, const int32_t* rows, int count, float* out,
                       cudaStream_t stream) {
  if (count <= 0 || n <= 0) return cudaSuccess;
  GatherRowsKernel<<<count, RowThreads(n), 0, stream>>>(x, n, rows, out);
  return cudaGetLastError();
}

cudaError_t AddInPlace(float* residual, const float* x, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  AddKernel<<<GridFor(n), kThreads, 0, stream>>>(residual, x, n);
  return cudaGetLastError();
}

cudaError_t AddBias(float* out, const float* bias, int rows, int n, cudaStream_t stream) {
  if (rows <= 0 || n <= 0) return cudaSuccess;
  const int64_t total = static_cast<int64_t>(rows) * n;
  AddBiasKernel<<<GridFor(total), kThreads, 0, stream>>>(out, bias, total, n);
  return cudaGetLastError();
}

cudaError_t ToBf16(const float* x, int64_t n, __nv_bfloat16* out, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ToBf16Kernel<<<GridFor(n), kThreads, 0, stream>>>(x, n, out);
  return cudaGetLastError();
}

cudaError_t RopeQk(float* qkv, int tokens, int64_t row_stride, int q_heads, int kv_heads,
                   int head_dim, const int32_t* positions, const float* cos_table,
                   const float* sin_table, bool interleaved, cudaStream_t stream) {
  if (head_dim < 2 || head_dim % 2 != 0 || q_heads < 0 || kv_heads < 0) {
    return cudaErrorInvalidValue;
  }
  const int heads = q_heads + kv_heads;
  if (tokens <= 0 || heads == 0) return cudaSuccess;
  RopeQkKernel<<<tokens, RowThreads(static_cast<int64_t>(heads) * head_dim / 2), 0, stream>>>(
      qkv, row_stride, heads, head_dim, positions, cos_table, sin_table, interleaved);
  return cudaGetLastError();
}

cudaError_t SwiGluBf16(const float* gate_up, int rows, int inter, __nv_bfloat16* out,
                       cudaStream_t stream) {
  if (rows <= 0 || inter <= 0) return cudaSuccess;
  const int64_t total = static_cast<int64_t>(rows) * inter;
  SwiGluBf16Kernel<<<GridFor(total), kThreads, 0, stream>>>(gate_up, total, inter, out);
  return cudaGetLastError();
}

}  // namespace baton::kernels::cuda
