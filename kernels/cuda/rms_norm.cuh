// The RMSNorm kernel, one template for every output type: f32 rows (ops.cu) and bf16 rows
// for the matrix multiplies that follow (step_ops.cu). Device code, included only by .cu
// files; its callers are RmsNorm/AddRmsNorm in ops.cuh and step_ops.cuh.
//
// Each row is one block of kNormThreads threads with a fixed reduction tree (xor shuffles
// within a warp, then the warps' sums the same way), so a row's result depends on the row
// alone, never on the batch around it (batch invariance, docs/engine.md).
//
// Each .cu file instantiates its own output types (f32 in ops.cu, bf16 in step_ops.cu), so
// that no kernel instantiation is defined in two translation units.
#pragma once

#include <cuda_bf16.h>

namespace baton::kernels::cuda::detail {

inline constexpr int kNormThreads = 256;  // fixed: the reduction tree depends on it alone

// The sum of v over the block's kNormThreads threads by a fixed tree: within each warp by
// xor shuffles, then the warps' sums in the same way. Every thread gets the total. Call it
// once per kernel: its shared array is reused without a barrier after the read.
__device__ inline float BlockSum(float v) {
  __shared__ float warp_sums[kNormThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  float total = lane < kNormThreads / 32 ? warp_sums[lane] : 0.0f;
  for (int offset = 16; offset > 0; offset /= 2) {
    total += __shfl_xor_sync(0xffffffffu, total, offset);
  }
  return total;
}

__device__ inline void StoreNormed(float* p, float v) { *p = v; }
__device__ inline void StoreNormed(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

// Block r normalizes row r of n: out[r] = x'[r] * rsqrt(mean(x'[r]^2) + eps) * weight, where
// x' = x, or with kAddResidual x' = residual + x, stored back into residual first.
template <bool kAddResidual, typename Out>
__global__ void RmsNormKernel(float* residual, const float* x, const float* weight, int n,
                              float eps, Out* out) {
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
  // With kAddResidual each thread reads back only the residual elements it wrote itself.
  const float* src = kAddResidual ? res : in;
  for (int i = threadIdx.x; i < n; i += kNormThreads) {
    StoreNormed(out + row * n + i, src[i] * scale * weight[i]);
  }
}

}  // namespace baton::kernels::cuda::detail
