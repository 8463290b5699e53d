// Which hardware runs the engine's forward: `--device cpu|cuda` and `--device-id N`, as
// every binary that runs the engine takes them (docs/gpu.md).
//
// The CUDA kernels live in a plugin, libbaton_cuda.so, beside the binaries (or where
// BATON_CUDA_LIBRARY names it), opened only for --device cuda: the CPU binaries of a CUDA
// build never need the CUDA libraries to start.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/gpu_ops.h"

namespace baton::engine {

struct DeviceOptions {
  std::string device = "cpu";  // cpu or cuda
  int device_id = 0;           // cuda: the GPU, among those CUDA_VISIBLE_DEVICES leaves
  // cuda: GEMM algorithms that never depend on the batch (--batch-invariant); the CPU
  // always is batch-invariant.
  bool batch_invariant = false;
  bool enforce_eager = false;  // cuda: no CUDA graphs (--enforce-eager, vLLM's name)
  // cuda: the share of the device memory left after the weights that goes to KV pages
  // (--gpu-memory-utilization), unless a KV size is given.
  double gpu_memory_utilization = 0.9;
};

// True where this binary was built with CUDA (nvcc was found when it was configured).
bool CudaBuilt();

// Checks, before any model is loaded, that the forward can run on `options` here. cpu is
// always OK. cuda is FailedPrecondition in a build without CUDA, where no GPU is visible
// or the plugin is missing, and InvalidArgument for a --device-id past the visible GPUs.
// Each message names the flag and what to do instead.
absl::Status CheckDevice(const DeviceOptions& options);

// The GPU's kernels for --device cuda: the plugin opened, the device made current, a
// stream, cuBLASLt. `batch_invariant` picks GEMM algorithms that never depend on the
// batch (--batch-invariant). The errors of CheckDevice, and the plugin's own.
absl::StatusOr<std::unique_ptr<kernels::GpuOps>> OpenGpuOps(const DeviceOptions& options,
                                                            bool batch_invariant);

// Where OpenGpuOps looks for the plugin: $BATON_CUDA_LIBRARY, else libbaton_cuda.so in
// the running binary's directory.
std::string CudaPluginPath();

}  // namespace baton::engine
