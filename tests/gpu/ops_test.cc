// The CUDA elementwise kernels and the GPU's random draws against their CPU counterparts
// (kernels/cpu/ops.h, kernels/counter_rng.h) on random inputs of several shapes. Skipped,
// with a message, where no GPU is visible.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/counter_rng.h"
#include "kernels/cpu/ops.h"
#include "kernels/cuda/ops.cuh"
#include "kernels/cuda/sampling.cuh"
#include "tests/gpu/gpu_test_util.h"

namespace baton::kernels::cuda {
namespace {

// A device copy of a host vector, freed at scope exit.
template <typename T>
class DeviceVector {
 public:
  explicit DeviceVector(const std::vector<T>& host) : n_(host.size()) {
    EXPECT_EQ(cudaMalloc(&p_, n_ * sizeof(T) + 1), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceVector() { cudaFree(p_); }
  T* get() { return p_; }
  std::vector<T> ToHost() const {
    std::vector<T> out(n_);
    EXPECT_EQ(cudaMemcpy(out.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }

 private:
  T* p_ = nullptr;
  size_t n_;
};

std::vector<float> Random(size_t n, uint32_t seed, float lo = -2.0f, float hi = 2.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// |a - b| <= rel * max(|b|, 1): relative where values are large, absolute near 0.
void ExpectNear(const std::vector<float>& got, const std::vector<float>& want, float rel) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], rel * std::max(std::fabs(want[i]), 1.0f)) << "at " << i;
  }
}

TEST(CudaOpsTest, RmsNormMatchesTheCpuKernel) {
  BATON_SKIP_WITHOUT_GPU();
  for (const int n : {64, 576, 2048, 4097}) {
    const int rows = 7;
    std::vector<float> x = Random(static_cast<size_t>(rows) * n, n);
    const std::vector<float> w = Random(n, n + 1, 0.5f, 1.5f);
    std::vector<float> want(x.size());
    for (int r = 0; r < rows; ++r) cpu::RmsNorm(&x[r * n], w.data(), n, 1e-5f, &want[r * n]);
    DeviceVector<float> dx(x), dw(w), dout(std::vector<float>(x.size()));
    ASSERT_EQ(RmsNorm(dx.get(), dw.get(), rows, n, 1e-5f, dout.get(), nullptr), cudaSuccess);
    ExpectNear(dout.ToHost(), want, 1e-5f);
  }
}

TEST(CudaOpsTest, AddRmsNormAddsTheResidualThenNormalizes) {
  BATON_SKIP_WITHOUT_GPU();
  const int rows = 5, n = 960;
  std::vector<float> residual = Random(rows * n, 1), x = Random(rows * n, 2);
  const std::vector<float> w = Random(n, 3, 0.5f, 1.5f);
  std::vector<float> sum(residual), want(residual.size());
  cpu::AddInPlace(sum.data(), x.data(), rows * n);
  for (int r = 0; r < rows; ++r) cpu::RmsNorm(&sum[r * n], w.data(), n, 1e-6f, &want[r * n]);
  DeviceVector<float> dres(residual), dx(x), dw(w);
  // out aliases x, as the forward uses it.
  ASSERT_EQ(AddRmsNorm(dres.get(), dx.get(), dw.get(), rows, n, 1e-6f, dx.get(), nullptr),
            cudaSuccess);
  ExpectNear(dres.ToHost(), sum, 0.0f);  // one f32 add, as on the CPU
  ExpectNear(dx.ToHost(), want, 1e-5f);
}

TEST(CudaOpsTest, NormIsTheSameRowWhateverTheBatch) {
  BATON_SKIP_WITHOUT_GPU();
  const int n = 2048;
  const std::vector<float> x = Random(9 * n, 4), w = Random(n, 5, 0.5f, 1.5f);
  DeviceVector<float> dx(x), dw(w), all{std::vector<float>(x.size())},
      one{std::vector<float>(static_cast<size_t>(n))};
  ASSERT_EQ(RmsNorm(dx.get(), dw.get(), 9, n, 1e-5f, all.get(), nullptr), cudaSuccess);
  ASSERT_EQ(RmsNorm(dx.get() + 4 * n, dw.get(), 1, n, 1e-5f, one.get(), nullptr), cudaSuccess);
  const std::vector<float> a = all.ToHost(), b = one.ToHost();
  for (int i = 0; i < n; ++i) ASSERT_EQ(a[4 * n + i], b[i]) << i;  // bit-identical
}

TEST(CudaOpsTest, RopeMatchesTheCpuKernelInBothLayouts) {
  BATON_SKIP_WITHOUT_GPU();
  for (const bool interleaved : {false, true}) {
    for (const int head_dim : {64, 128}) {
      const int tokens = 6, heads = 5, half = head_dim / 2;
      std::vector<float> x = Random(tokens * heads * head_dim, head_dim + interleaved);
      std::vector<float> cos(tokens * half), sin(tokens * half);
      for (int t = 0; t < tokens; ++t) {
        for (int i = 0; i < half; ++i) {
          const double angle = (t + 3) * std::pow(10000.0, -2.0 * i / head_dim);
          cos[t * half + i] = static_cast<float>(std::cos(angle));
          sin[t * half + i] = static_cast<float>(std::sin(angle));
        }
      }
      std::vector<float> want(x);
      for (int t = 0; t < tokens; ++t) {
        cpu::ApplyRope(&want[t * heads * head_dim], heads, head_dim, &cos[t * half], &sin[t * half],
                       interleaved);
      }
      DeviceVector<float> dx(x), dcos(cos), dsin(sin);
      ASSERT_EQ(ApplyRope(dx.get(), tokens, heads, head_dim, dcos.get(), dsin.get(), interleaved,
                          nullptr),
                cudaSuccess);
      ExpectNear(dx.ToHost(), want, 1e-6f);
    }
  }
}

TEST(CudaOpsTest, SwiGluMatchesTheCpuKernel) {
  BATON_SKIP_WITHOUT_GPU();
  const int64_t n = 3 * 8192 + 5;
  const std::vector<float> gate = Random(n, 6, -8.0f, 8.0f), up = Random(n, 7);
  std::vector<float> want(n);
  cpu::SwiGlu(gate.data(), up.data(), n, want.data());
  DeviceVector<float> dg(gate), du(up);
  ASSERT_EQ(SwiGlu(dg.get(), du.get(), n, dg.get(), nullptr), cudaSuccess);
  ExpectNear(dg.ToHost(), want, 2e-6f);
}

TEST(CudaOpsTest, EmbeddingGatherConvertsEachRowAndMarksBadIds) {
  BATON_SKIP_WITHOUT_GPU();
  const int64_t rows = 50;
  const int dim = 96;
  const std::vector<float> table = Random(rows * dim, 8);
  std::vector<__half> half(table.size());
  std::vector<__nv_bfloat16> bf16(table.size());
  for (size_t i = 0; i < table.size(); ++i) {
    half[i] = __float2half(table[i]);
    bf16[i] = __float2bfloat16(table[i]);
  }
  const std::vector<int32_t> ids = {3, 0, 49, 3, 50, -1};
  DeviceVector<int32_t> dids(ids);
  DeviceVector<float> f32(table), out(std::vector<float>(ids.size() * dim));
  DeviceVector<__half> f16(half);
  DeviceVector<__nv_bfloat16> b16(bf16);
  for (const RowType type : {RowType::kF32, RowType::kF16, RowType::kBf16}) {
    const void* src = type == RowType::kF32   ? static_cast<const void*>(f32.get())
                      : type == RowType::kF16 ? static_cast<const void*>(f16.get())
                                              : static_cast<const void*>(b16.get());
    ASSERT_EQ(EmbeddingGather(src, type, rows, dim, dids.get(), static_cast<int>(ids.size()),
                              out.get(), nullptr),
              cudaSuccess);
    const std::vector<float> got = out.ToHost();
    for (size_t t = 0; t < ids.size(); ++t) {
      for (int i = 0; i < dim; ++i) {
        const float g = got[t * dim + i];
        if (ids[t] < 0 || ids[t] >= rows) {
          ASSERT_TRUE(std::isnan(g)) << "id " << ids[t];
          continue;
        }
        const size_t k = static_cast<size_t>(ids[t]) * dim + i;
        const float want = type == RowType::kF32   ? table[k]
                           : type == RowType::kF16 ? __half2float(half[k])
                                                   : __bfloat162float(bf16[k]);
        ASSERT_EQ(g, want) << "token " << t << " dim " << i;  // a conversion is exact
      }
    }
  }
}

TEST(CudaSamplingTest, TheGpuDrawsWhatTheCpuDraws) {
  BATON_SKIP_WITHOUT_GPU();
  std::vector<uint64_t> seeds, steps;
  for (uint64_t s : {0ull, 1ull, 2ull, 42ull, 0xFFFFFFFFFFFFFFFFull}) {
    for (uint64_t t : {0ull, 1ull, 7ull, 1000000ull}) {
      seeds.push_back(s);
      steps.push_back(t);
    }
  }
  DeviceVector<uint64_t> ds(seeds), dt(steps);
  DeviceVector<double> out(std::vector<double>(seeds.size()));
  ASSERT_EQ(CounterUniforms(ds.get(), dt.get(), static_cast<int>(seeds.size()), out.get(), nullptr),
            cudaSuccess);
  const std::vector<double> got = out.ToHost();
  for (size_t i = 0; i < seeds.size(); ++i) {
    ASSERT_EQ(got[i], kernels::CounterUniform(seeds[i], steps[i])) << seeds[i] << " " << steps[i];
  }
}

}  // namespace
}  // namespace baton::kernels::cuda
