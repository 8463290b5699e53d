// libbaton_host_gpu.so: the host emulation of GpuOps (host_gpu_ops.h) behind the CUDA
// plugin's entry point (kernels/cuda_plugin_abi.h). With BATON_CUDA_LIBRARY naming it,
// `--device cuda` runs the GPU backend in any binary, child processes included, where no
// GPU is: multi-process tests of GPU workers (KV transfers from and to GPU pages) run in
// CI this way. BATON_HOST_GPU_MEMORY sets the emulated device's size in bytes (1 GiB).
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "kernels/cuda_plugin_abi.h"
#include "tests/fakes/host_gpu_ops.h"

extern "C" __attribute__((visibility("default"))) int baton_cuda_open_gpu_ops(
    int abi, int /*device_id*/, int /*batch_invariant*/, baton::kernels::GpuOps** out, char* error,
    size_t error_len) {
  if (abi != baton::kernels::kCudaPluginAbi) {
    std::snprintf(error, error_len,
                  "libbaton_host_gpu.so was built from other sources than this binary (plugin ABI "
                  "%d, binary %d); rebuild both",
                  baton::kernels::kCudaPluginAbi, abi);
    return static_cast<int>(absl::StatusCode::kFailedPrecondition);
  }
  auto ops = std::make_unique<baton::fakes::HostGpuOps>();
  if (const char* bytes = std::getenv("BATON_HOST_GPU_MEMORY"); bytes != nullptr) {
    ops->set_memory_bytes(std::strtoll(bytes, nullptr, 10));
  }
  *out = ops.release();
  return 0;
}
