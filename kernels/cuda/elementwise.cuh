// Element-wise kernels. Kernels take raw pointers, sizes and a stream, and know no
// engine types; the caller checks the returned cudaError_t.
#pragma once

#include <cuda_runtime.h>

namespace baton::kernels::cuda {

// out[i] = a[i] * scale + b[i] for i < n.
cudaError_t ScaleAdd(const float* a, const float* b, float scale, float* out, int n,
                     cudaStream_t stream);

}  // namespace baton::kernels::cuda
