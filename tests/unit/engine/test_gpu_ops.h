// The GpuOps the GPU forward's tests run on: the host emulation of the kernels
// (tests/fakes/host_gpu_ops.h) in the unit build, and a CUDA device where the same test
// source is built as a GPU test (tests/gpu/CMakeLists.txt defines BATON_TEST_ON_CUDA), so
// that one set of assertions checks the planning in CI and the kernels on a GPU.
#pragma once

#include <memory>

#include "gtest/gtest.h"
#include "kernels/gpu_ops.h"
#include "tests/fakes/host_gpu_ops.h"

#if BATON_TEST_ON_CUDA
#include "kernels/cuda/cuda_gpu_ops.h"
#include "tests/gpu/gpu_test_util.h"
#endif

namespace baton::testing {

// A new GpuOps; null (after a test failure) when none can be had. The emulated device
// has `emulated_bytes` of memory.
inline std::unique_ptr<kernels::GpuOps> NewTestGpuOps(int64_t emulated_bytes = int64_t{256} << 20) {
#if BATON_TEST_ON_CUDA
  (void)emulated_bytes;
  auto ops = kernels::cuda::CudaGpuOps::Create(0, /*batch_invariant=*/true);
  EXPECT_TRUE(ops.ok()) << ops.status();
  if (!ops.ok()) return nullptr;
  return std::unique_ptr<kernels::GpuOps>(std::move(*ops));
#else
  auto ops = std::make_unique<fakes::HostGpuOps>();
  ops->set_memory_bytes(emulated_bytes);
  return ops;
#endif
}

// The emulation, when the test runs on it (for what only it can tell: bytes in use).
inline fakes::HostGpuOps* Emulation(kernels::GpuOps* ops) {
  return dynamic_cast<fakes::HostGpuOps*>(ops);
}

}  // namespace baton::testing

// Skips the test where it is built for CUDA and no GPU is visible.
#if BATON_TEST_ON_CUDA
#define BATON_SKIP_WITHOUT_TEST_GPU() BATON_SKIP_WITHOUT_GPU()
#else
#define BATON_SKIP_WITHOUT_TEST_GPU() (void)0
#endif
