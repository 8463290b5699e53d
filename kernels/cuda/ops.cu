#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>

#include "kernels/cuda/ops.cuh"

namespace baton::kernels::cuda {
namespace {

constexpr int kNormThreads = 256;  // fixed: the reduction tree depends on it alone

// The sum of v over the block's threads by a fixed tree: within each warp by xor
// shuffles, then the warps' sums by the first warp in the same way.
__device__ float BlockSum(float v) {
  __shared__ float warp_sums[kNormThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  float total = lane < kNormThreads / 32 ? warp_sums[lane] : 0.0f;
  for (int offset = 16; offset > 0; offset /= 2) {
    total += __shfl_xor_sync(0xffffffffu, total, offset);
  }
  return total;  // every thread of warp 0 holds it; broadcast below
}

template <bool kAddResidual>
__global__ void RmsNormKernel(float* residual, const float* x, const float* weight, int n,
                              float eps, float* out) {
  const int64_t row = blockIdx.x;
  const float* in = x + row * n;
  float* res = kAddResidual ? residual + row * n : nullptr;
  float partial = 0.0f;
  for (int i = threadIdx.x; i < n; i += kNormThreads) {
    float v = in[i];
    if constexpr (kAddResidual) {
      v += res[i];
      res[i] = v;
    }
    partial += v * v;
  }
  __shared__ float scale;
  const float sum = BlockSum(partial);
  if (threadIdx.x == 0) scale = rsqrtf(sum / static_cast<float>(n) + eps);
  __syncthreads();
  const float* src = kAddResidual ? res : in;
  for (int i = threadIdx.x; i < n; i += kNormThreads) out[row * n + i] = src[i] * scale * weight[i];
}

__global__ void RopeKernel(float* x, int num_heads, int head_dim, const float* cos,
                           const float* sin, bool interleaved) {
  const int token = blockIdx.x;
  const int half = head_dim / 2;
  const float* c = cos + static_cast<int64_t>(token) * half;
  const float* s = sin + static_cast<int64_t>(token) * half;
  float* row = x + static_cast<int64_t>(token) * num_heads * head_dim;
  for (int k = threadIdx.x; k < num_heads * half; k += blockDim.x) {
    const int h = k / half, i = k % half;
    float* v = row + static_cast<int64_t>(h) * head_dim;
    const int ia = interleaved ? 2 * i : i, ib = interleaved ? 2 * i + 1 : i + half;
    const float a = v[ia], b = v[ib];
    v[ia] = a * c[i] - b * s[i];
    v[ib] = b * c[i] + a * s[i];
  }
}

__global__ void SwiGluKernel(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = gate[i];
    out[i] = g / (1.0f + expf(-g)) * up[i];
  }
}

template <typename T>
__device__ float ToFloat(T v) {
  return static_cast<float>(v);
}
template <>
__device__ float ToFloat(__half v) {
  return __half2float(v);
}
template <>
__device__ float ToFloat(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

template <typename T>
__global__ void GatherKernel(const T* table, int64_t rows, int dim, const int32_t* ids,
                             float* out) {
  const int t = blockIdx.x;
  const int32_t id = ids[t];
  float* dst = out + static_cast<int64_t>(t) * dim;
  if (id < 0 || id >= rows) {
    for (int i = threadIdx.x; i < dim; i += blockDim.x) dst[i] = NAN;
    return;
  }
  const T* src = table + static_cast<int64_t>(id) * dim;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) dst[i] = ToFloat(src[i]);
}

}  // namespace

cudaError_t RmsNorm(const float* x, const float* weight, int rows, int n, float eps, float* out,
                    cudaStream_t stream) {
  if (rows <= 0 || n <= 0) return cudaSuccess;
  RmsNormKernel<false><<<rows, kNormThreads, 0, stream>>>(nullptr, x, weight, n, eps, out);
  return cudaGetLastError();
}

cudaError_t AddRmsNorm(float* residual, const float* x, const float* weight, int rows, int n,
                       float eps, float* out, cudaStream_t stream) {
  if (rows <= 0 || n <= 0) return cudaSuccess;
  RmsNormKernel<true><<<rows, kNormThreads, 0, stream>>>(residual, x, weight, n, eps, out);
  return cudaGetLastError();
}

cudaError_t ApplyRope(float* x, int tokens, int num_heads, int head_dim, const float* cos,
                      const float* sin, bool interleaved, cudaStream_t stream) {
  if (tokens <= 0 || num_heads <= 0 || head_dim < 2 || head_dim % 2 != 0) {
    return tokens <= 0 || num_heads <= 0 ? cudaSuccess : cudaErrorInvalidValue;
  }
  const int threads = num_heads * head_dim / 2 < 256 ? 64 : 256;
  RopeKernel<<<tokens, threads, 0, stream>>>(x, num_heads, head_dim, cos, sin, interleaved);
  return cudaGetLastError();
}

cudaError_t SwiGlu(const float* gate, const float* up, int64_t n, float* out, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  SwiGluKernel<<<static_cast<unsigned>(blocks < 65535 ? blocks : 65535), kThreads, 0, stream>>>(
      gate, up, n, out);
  return cudaGetLastError();
}

cudaError_t EmbeddingGather(const void* table, RowType type, int64_t rows, int dim,
                            const int32_t* ids, int tokens, float* out, cudaStream_t stream) {
  if (tokens <= 0 || dim <= 0) return cudaSuccess;
  const int threads = dim < 256 ? 64 : 256;
  switch (type) {
    case RowType::kF32:
      GatherKernel<<<tokens, threads, 0, stream>>>(static_cast<const float*>(table), rows, dim, ids,
                                                   out);
      break;
    case RowType::kF16:
      GatherKernel<<<tokens, threads, 0, stream>>>(static_cast<const __half*>(table), rows, dim,
                                                   ids, out);
      break;
    case RowType::kBf16:
      GatherKernel<<<tokens, threads, 0, stream>>>(static_cast<const __nv_bfloat16*>(table), rows,
                                                   dim, ids, out);
      break;
  }
  return cudaGetLastError();
}

}  // namespace baton::kernels::cuda
