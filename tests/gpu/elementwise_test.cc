#include <cuda_runtime.h>

#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/elementwise.cuh"
#include "tests/gpu/gpu_test_util.h"

namespace baton::kernels::cuda {
namespace {

TEST(ElementwiseTest, ScaleAddMatchesHost) {
  BATON_SKIP_WITHOUT_GPU();
  constexpr int n = 1000;
  std::vector<float> a(n), b(n), out(n);
  for (int i = 0; i < n; ++i) {
    a[i] = static_cast<float>(i) * 0.5f;
    b[i] = static_cast<float>(n - i);
  }
  float *da = nullptr, *db = nullptr, *dout = nullptr;
  ASSERT_EQ(cudaMalloc(&da, n * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&db, n * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dout, n * sizeof(float)), cudaSuccess);
  cudaMemcpy(da, a.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(db, b.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  ASSERT_EQ(ScaleAdd(da, db, 3.0f, dout, n, nullptr), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(out.data(), dout, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  for (int i = 0; i < n; ++i) EXPECT_FLOAT_EQ(out[i], a[i] * 3.0f + b[i]) << i;
  cudaFree(da);
  cudaFree(db);
  cudaFree(dout);
}

}  // namespace
}  // namespace baton::kernels::cuda
