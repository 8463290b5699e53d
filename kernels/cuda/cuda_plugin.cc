// libbaton_cuda.so: the CUDA kernels behind one C entry point (kernels/cuda_plugin_abi.h),
// which engine/device.cc opens for --device cuda. Everything that needs the CUDA libraries
// at load time (the shared runtime, cuBLASLt) is here, not in the binaries.
#include <cstdio>
#include <string>

#include "kernels/cuda/cuda_gpu_ops.h"
#include "kernels/cuda_plugin_abi.h"

extern "C" __attribute__((visibility("default"))) int baton_cuda_open_gpu_ops(
    int abi, int device_id, int batch_invariant, baton::kernels::GpuOps** out, char* error,
    size_t error_len) {
  auto fail = [&](const absl::Status& s) {
    if (error != nullptr && error_len > 0) {
      std::snprintf(error, error_len, "%s", std::string(s.message()).c_str());
    }
    return static_cast<int>(s.code());
  };
  if (abi != baton::kernels::kCudaPluginAbi) {
    return fail(absl::FailedPreconditionError(
        "libbaton_cuda.so was built from other sources than this binary (plugin ABI " +
        std::to_string(baton::kernels::kCudaPluginAbi) + ", binary " + std::to_string(abi) +
        "); rebuild both"));
  }
  auto ops = baton::kernels::cuda::CudaGpuOps::Create(device_id, batch_invariant != 0);
  if (!ops.ok()) return fail(ops.status());
  *out = ops->release();
  return 0;
}
