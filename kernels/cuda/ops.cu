#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>

#include "kernels/cuda/ops.cuh"
#include "kernels/cuda/rms_norm.cuh"
#include "kernels/cuda/rope.cuh"

namespace baton::kernels::cuda {
namespace {

using detail::kNormThreads;
using detail::RmsNormKernel;

__global__ void RopeKernel(float* x, int num_heads, int head_dim, const float* cos,
                           const float* sin, bool interleaved) {
  const int64_t token = blockIdx.x;
  const int half = head_dim / 2;
  detail::RotateHeads(x + token * num_heads * head_dim, num_heads, head_dim, cos + token * half,
                      sin + token * half, interleaved);
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
  RmsNormKernel<false, float><<<rows, kNormThreads, 0, stream>>>(nullptr, x, weight, n, eps, out);
  return cudaGetLastError();
}

cudaError_t AddRmsNorm(float* residual, const float* x, const float* weight, int rows, int n,
                       float eps, float* out, cudaStream_t stream) {
  if (rows <= 0 || n <= 0) return cudaSuccess;
  RmsNormKernel<true, float><<<rows, kNormThreads, 0, stream>>>(residual, x, weight, n, eps, out);
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
