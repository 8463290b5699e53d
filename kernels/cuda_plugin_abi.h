// The one C entry point of the CUDA plugin (libbaton_cuda.so, kernels/cuda/cuda_plugin.cc),
// which engine/device.cc opens with dlopen for --device cuda. The plugin and the binary
// must be built from the same sources: the ABI number changes with kernels::GpuOps.
#pragma once

#include <cstddef>

namespace baton::kernels {

class GpuOps;

inline constexpr int kCudaPluginAbi = 1;
inline constexpr const char* kCudaPluginName = "libbaton_cuda.so";
inline constexpr const char* kCudaPluginOpenSymbol = "baton_cuda_open_gpu_ops";

// Returns 0 and a new GpuOps (the caller owns it) in *out, or an absl::StatusCode with the
// message in `error` (NUL-terminated, at most error_len bytes).
using CudaPluginOpenFn = int (*)(int abi, int device_id, int batch_invariant, GpuOps** out,
                                 char* error, size_t error_len);

}  // namespace baton::kernels
