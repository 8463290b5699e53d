// What the GPU tests share: whether a device is visible, and host <-> device copies.
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "gtest/gtest.h"

namespace baton::testing {

inline bool HaveDevice() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

#define BATON_SKIP_WITHOUT_GPU() \
  if (!::baton::testing::HaveDevice()) GTEST_SKIP() << "no CUDA device: GPU test skipped"

// A new device copy of `host` (the caller frees it with cudaFree).
template <typename T>
T* Upload(const std::vector<T>& host) {
  T* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, host.size() * sizeof(T) + 1), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
            cudaSuccess);
  return p;
}

template <typename T>
std::vector<T> Download(const T* p, size_t n) {
  std::vector<T> out(n);
  EXPECT_EQ(cudaMemcpy(out.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return out;
}

}  // namespace baton::testing
