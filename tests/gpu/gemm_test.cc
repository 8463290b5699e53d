// The cuBLASLt linear layer against a float64 reference over the same bf16 inputs, and
// its batch-invariant mode: a row gives the same bits whatever the number of rows. Skipped
// without a GPU.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/gemm.h"
#include "tests/gpu/gpu_test_util.h"

namespace baton::kernels::cuda {
namespace {

using ::baton::testing::Upload;

std::vector<__nv_bfloat16> RandomBf16(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<__nv_bfloat16> v(n);
  for (auto& x : v) x = __float2bfloat16_rn(uni(rng));
  return v;
}

std::vector<float> RunLinear(Gemm& gemm, const __nv_bfloat16* x, const __nv_bfloat16* w, int m,
                             int n, int k) {
  float* out = nullptr;
  EXPECT_EQ(cudaMalloc(&out, sizeof(float) * m * n), cudaSuccess);
  EXPECT_EQ(cudaMemset(out, 0xFF, sizeof(float) * m * n), cudaSuccess);  // NaN if unwritten
  const absl::Status s = gemm.Linear(x, w, m, n, k, GemmOut::kF32, out, nullptr);
  EXPECT_TRUE(s.ok()) << s;
  std::vector<float> host(static_cast<size_t>(m) * n);
  EXPECT_EQ(cudaMemcpy(host.data(), out, host.size() * sizeof(float), cudaMemcpyDeviceToHost),
            cudaSuccess);
  cudaFree(out);
  return host;
}

TEST(GemmTest, LinearMatchesAFloat64Reference) {
  BATON_SKIP_WITHOUT_GPU();
  for (const bool invariant : {false, true}) {
    auto gemm = Gemm::Create(invariant);
    ASSERT_TRUE(gemm.ok()) << gemm.status();
    struct Shape {
      int m, n, k;
    };
    for (const Shape s :
         {Shape{1, 2048, 2048}, Shape{7, 8192, 2048}, Shape{37, 576, 1536}, Shape{128, 256, 64}}) {
      const auto x = RandomBf16(static_cast<size_t>(s.m) * s.k, s.m + s.n);
      const auto w = RandomBf16(static_cast<size_t>(s.n) * s.k, s.k);
      __nv_bfloat16 *dx = Upload(x), *dw = Upload(w);
      const std::vector<float> got = RunLinear(**gemm, dx, dw, s.m, s.n, s.k);
      double err = 0, norm = 0;
      for (int i = 0; i < s.m; ++i) {
        for (int j = 0; j < s.n; ++j) {
          double want = 0;
          for (int p = 0; p < s.k; ++p) {
            want += static_cast<double>(__bfloat162float(x[static_cast<size_t>(i) * s.k + p])) *
                    __bfloat162float(w[static_cast<size_t>(j) * s.k + p]);
          }
          const double g = got[static_cast<size_t>(i) * s.n + j];
          ASSERT_FALSE(std::isnan(g)) << i << "," << j;
          err += (g - want) * (g - want);
          norm += want * want;
        }
      }
      // bf16 inputs are exact in f32; what remains is f32 accumulation over k.
      EXPECT_LT(std::sqrt(err / norm), 1e-5) << s.m << "x" << s.n << "x" << s.k;
      // bf16 output: the f32 result rounded once, so within bf16's half ulp of the f32 one.
      __nv_bfloat16* out16 = nullptr;
      ASSERT_EQ(cudaMalloc(&out16, sizeof(__nv_bfloat16) * s.m * s.n), cudaSuccess);
      const absl::Status st =
          (*gemm)->Linear(dx, dw, s.m, s.n, s.k, GemmOut::kBf16, out16, nullptr);
      ASSERT_TRUE(st.ok()) << st;
      const auto got16 = ::baton::testing::Download(out16, static_cast<size_t>(s.m) * s.n);
      for (size_t i = 0; i < got16.size(); ++i) {
        const float f = got[i];
        ASSERT_NEAR(__bfloat162float(got16[i]), f, std::fabs(f) * (1.0f / 256) + 1e-6f) << i;
      }
      cudaFree(out16);
      cudaFree(dx);
      cudaFree(dw);
    }
  }
}

TEST(GemmTest, BatchInvariantRowsAreTheSameBitsInAnyBatch) {
  BATON_SKIP_WITHOUT_GPU();
  auto gemm = Gemm::Create(/*batch_invariant=*/true);
  ASSERT_TRUE(gemm.ok()) << gemm.status();
  const int n = 2048, k = 2048;
  const auto x = RandomBf16(static_cast<size_t>(256) * k, 9);
  const auto w = RandomBf16(static_cast<size_t>(n) * k, 10);
  __nv_bfloat16 *dx = Upload(x), *dw = Upload(w);
  const std::vector<float> all = RunLinear(**gemm, dx, dw, 256, n, k);
  for (const int m : {1, 3, 37, 200}) {
    // Rows 0..m-1 of the same x, in a batch of m.
    const std::vector<float> some = RunLinear(**gemm, dx, dw, m, n, k);
    for (size_t i = 0; i < some.size(); ++i) ASSERT_EQ(some[i], all[i]) << "m=" << m << " at " << i;
  }
  EXPECT_EQ((*gemm)->cached_shapes(), 1u);  // one plan for every m of (n, k)
  EXPECT_EQ((*gemm)->Linear(dx, dw, 0, n, k, GemmOut::kF32, nullptr, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  cudaFree(dx);
  cudaFree(dw);
}

}  // namespace
}  // namespace baton::kernels::cuda
