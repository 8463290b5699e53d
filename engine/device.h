// Which hardware runs the engine's forward: `--device cpu|cuda` and `--device-id N`, as
// every binary that runs the engine takes them (docs/gpu.md).
#pragma once

#include <string>

#include "absl/status/status.h"

namespace baton::engine {

struct DeviceOptions {
  std::string device = "cpu";  // cpu or cuda
  int device_id = 0;           // cuda: the GPU, among those CUDA_VISIBLE_DEVICES leaves
};

// True where this binary was built with CUDA (nvcc was found when it was configured).
bool CudaBuilt();

// Checks, before any model is loaded, that the forward can run on `options` here. cpu is
// always OK. cuda is FailedPrecondition in a build without CUDA or where no GPU is
// visible, InvalidArgument for a --device-id past the visible GPUs, and Unimplemented
// once the GPU opens: the CUDA forward is not written yet. Each message names the flag
// and what to do instead.
absl::Status CheckDevice(const DeviceOptions& options);

}  // namespace baton::engine
