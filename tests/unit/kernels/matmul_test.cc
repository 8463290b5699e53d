#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "common/thread_pool.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/quant_blocks.h"

namespace baton::cpu {
namespace {

using internal::Isa;

constexpr DType kAllTypes[] = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ8_0, DType::kQ4_0,
                               DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ2_K, DType::kQ3_K,
                               DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};

int64_t BlockOf(DType dtype) { return LayoutOf(dtype).elems; }

std::vector<Isa> SupportedIsas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16}) {
    if (internal::IsaSupported(isa)) out.push_back(isa);
  }
  return out;
}

// Selects an ISA for the scope of a test.
class ScopedIsa {
 public:
  explicit ScopedIsa(Isa isa) { internal::SetIsaForTesting(isa); }
  ~ScopedIsa() { internal::ResetIsaForTesting(); }
};

uint32_t FloatBits(float f) {
  uint32_t b = 0;
  std::memcpy(&b, &f, sizeof(b));
  return b;
}

float BitsFloat(uint32_t b) {
  float f = 0;
  std::memcpy(&f, &b, sizeof(f));
  return f;
}

// Round to nearest even (finite inputs), as vcvtneps2bf16 does.
float RoundToBf16(float f) {
  uint32_t b = FloatBits(f);
  b += 0x7fffu + ((b >> 16) & 1u);
  return BitsFloat(b & 0xffff0000u);
}

// A weight matrix in its stored form plus its exact values.
struct TestWeights {
  DType dtype;
  int64_t n = 0;
  int64_t k = 0;
  std::vector<uint8_t> bytes;
  std::vector<double> exact;  // n * k

  MatrixRef ref() const { return MatrixRef{dtype, bytes.data(), n, k}; }
};

void PutU16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, sizeof(v)); }

// Normal f16 values with exponent in [lo, hi] (unbiased), random sign and mantissa.
uint16_t RandomHalf(std::mt19937& rng, int lo, int hi) {
  std::uniform_int_distribution<int> exp(lo + 15, hi + 15);
  std::uniform_int_distribution<int> mant(0, 1023);
  std::uniform_int_distribution<int> sign(0, 1);
  return static_cast<uint16_t>((sign(rng) << 15) | (exp(rng) << 10) | mant(rng));
}

TestWeights MakeWeights(DType dtype, int64_t n, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  TestWeights w;
  w.dtype = dtype;
  w.n = n;
  w.k = k;
  const size_t row_bytes = RowBytes(dtype, k);
  w.bytes.assign(row_bytes * n, 0);
  w.exact.assign(n * k, 0.0);
  for (int64_t j = 0; j < n; ++j) {
    uint8_t* row = w.bytes.data() + j * row_bytes;
    double* ex = w.exact.data() + j * k;
    switch (dtype) {
      case DType::kF32:
        for (int64_t c = 0; c < k; ++c) {
          const float v = uni(rng);
          std::memcpy(row + 4 * c, &v, 4);
          ex[c] = v;
        }
        break;
      case DType::kF16:
        for (int64_t c = 0; c < k; ++c) {
          const uint16_t h = RandomHalf(rng, -5, 1);
          PutU16(row + 2 * c, h);
          ex[c] = internal::HalfToFloat(h);
        }
        break;
      case DType::kBF16:
        for (int64_t c = 0; c < k; ++c) {
          const uint32_t bits = FloatBits(uni(rng)) & 0xffff0000u;
          PutU16(row + 2 * c, static_cast<uint16_t>(bits >> 16));
          ex[c] = BitsFloat(bits);
        }
        break;
      case DType::kQ8_0: {
        std::uniform_int_distribution<int> q(-127, 127);
        for (int64_t b = 0; b < k / 32; ++b) {
          uint8_t* blk = row + 34 * b;
          const uint16_t d = RandomHalf(rng, -10, -6);
          PutU16(blk, d);
          for (int t = 0; t < 32; ++t) {
            const auto v = static_cast<int8_t>(q(rng));
            std::memcpy(blk + 2 + t, &v, 1);
            ex[b * 32 + t] = static_cast<double>(internal::HalfToFloat(d)) * v;
          }
        }
        break;
      }
      default: {
        // Random quants with modest f16 scales; the exact values are the dequantized ones,
        // which OracleDequantTest checks against llama.cpp's.
        const BlockLayout layout = LayoutOf(dtype);
        std::uniform_int_distribution<int> byte(0, 255);
        for (size_t e = 0; e < row_bytes; ++e) row[e] = static_cast<uint8_t>(byte(rng));
        for (int64_t b = 0; b < k / layout.elems; ++b) {
          for (int off : layout.scale_offsets) {
            if (off >= 0) PutU16(row + b * layout.bytes + off, RandomHalf(rng, -10, -6));
          }
        }
        std::vector<float> values(k);
        DequantizeBlocks(dtype, row, k, values.data());
        for (int64_t c = 0; c < k; ++c) ex[c] = values[c];
        break;
      }
    }
  }
  return w;
}

std::vector<float> RandomFloats(size_t count, uint32_t seed, float lo = -1, float hi = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uni(lo, hi);
  std::vector<float> v(count);
  for (float& f : v) f = uni(rng);
  return v;
}

bool UsesDpBf16(Isa isa, DType dtype) { return isa == Isa::kAvx512Bf16 && dtype == DType::kBF16; }

// The error bound the tests hold each ISA to, for |y - y_exact| with y_exact in float64
// from the stored weights (u = 2^-24):
//   (steps + log2(lanes) + 3) * u * (sum_k |x_k w_k| + |bias|)
// where steps is the number of additions into one accumulator lane (ceil(k / lanes); twice
// ceil(k / 32) for vdpbf16ps, which adds two products per lane) and log2(lanes) those of
// the final lane tree; the 3 cover the bias, Q8_0's rounding of d * q to f32 and the
// scalar kernel's separate rounding of each product. On the vdpbf16ps path x is rounded
// to bf16 first, which adds up to 2^-8 * sum_k |x_k w_k|.
double ErrorBound(Isa isa, DType dtype, int64_t k, double abs_sum, double abs_bias) {
  const int lanes = (isa == Isa::kScalar || isa == Isa::kAvx2) ? 8 : 16;
  const int64_t steps = UsesDpBf16(isa, dtype) ? 2 * ((k + 31) / 32) : (k + lanes - 1) / lanes;
  const double ops = static_cast<double>(steps) + std::log2(lanes) + 3;
  double bound = ops * std::ldexp(1.0, -24) * (abs_sum + abs_bias);
  if (UsesDpBf16(isa, dtype)) bound += std::ldexp(1.0, -8) * abs_sum * (1 + 1e-3);
  return bound * 1.0001 + 1e-30;
}

TEST(MatMulTest, NamesAndRowBytes) {
  EXPECT_STREQ(DTypeName(DType::kF32), "f32");
  EXPECT_STREQ(DTypeName(DType::kF16), "f16");
  EXPECT_STREQ(DTypeName(DType::kBF16), "bf16");
  EXPECT_STREQ(DTypeName(DType::kQ8_0), "q8_0");
  EXPECT_EQ(RowBytes(DType::kF32, 5), 20u);
  EXPECT_EQ(RowBytes(DType::kF16, 5), 10u);
  EXPECT_EQ(RowBytes(DType::kBF16, 7), 14u);
  EXPECT_EQ(RowBytes(DType::kQ8_0, 64), 68u);
  EXPECT_EQ(RowBytes(DType::kQ8_0, 0), 0u);
  EXPECT_STREQ(DTypeName(DType::kQ4_K), "q4_K");
  EXPECT_EQ(RowBytes(DType::kQ4_0, 64), 36u);
  EXPECT_EQ(RowBytes(DType::kQ4_K, 512), 288u);
  EXPECT_EQ(RowBytes(DType::kQ6_K, 256), 210u);
}

TEST(MatMulTest, IsaSelection) {
  const std::string automatic = ActiveIsa();
  for (Isa isa : SupportedIsas()) {
    ScopedIsa scoped(isa);
    EXPECT_STREQ(ActiveIsa(), internal::IsaName(isa));
  }
  EXPECT_EQ(ActiveIsa(), automatic);
  EXPECT_TRUE(internal::IsaSupported(Isa::kScalar));
  const CpuFeatures& f = GetCpuFeatures();
  EXPECT_EQ(internal::IsaSupported(Isa::kAvx512Bf16),
            internal::IsaSupported(Isa::kAvx512) && f.avx512bf16);
}

#if defined(__x86_64__)
__attribute__((target("f16c"))) float HardwareHalfToFloat(uint16_t h) { return _cvtsh_ss(h); }

TEST(MatMulTest, HalfToFloatMatchesF16c) {
  if (!GetCpuFeatures().f16c) GTEST_SKIP() << "no F16C";
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const float want = HardwareHalfToFloat(static_cast<uint16_t>(h));
    const float got = internal::HalfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << h;
    } else {
      ASSERT_EQ(FloatBits(got), FloatBits(want)) << h;
    }
  }
}
#endif

TEST(MatMulTest, DequantizeRow) {
  // Row 1 of each matrix holds the interesting values.
  {
    const float data[] = {9, 9, 1.5f, -2.25f};
    float out[2];
    DequantizeRow(MatrixRef{DType::kF32, data, 2, 2}, 1, out);
    EXPECT_EQ(out[0], 1.5f);
    EXPECT_EQ(out[1], -2.25f);
  }
  {
    // 1.0, -2.0, 0.5, smallest subnormal 2^-24, -inf, 65504.
    const uint16_t data[] = {0, 0, 0, 0, 0, 0, 0x3c00, 0xc000, 0x3800, 0x0001, 0xfc00, 0x7bff};
    float out[6];
    DequantizeRow(MatrixRef{DType::kF16, data, 2, 6}, 1, out);
    EXPECT_EQ(out[0], 1.0f);
    EXPECT_EQ(out[1], -2.0f);
    EXPECT_EQ(out[2], 0.5f);
    EXPECT_EQ(out[3], std::ldexp(1.0f, -24));
    EXPECT_EQ(out[4], -std::numeric_limits<float>::infinity());
    EXPECT_EQ(out[5], 65504.0f);
  }
  {
    const uint16_t data[] = {0, 0, 0x3f80, 0xc0a0};  // 1.0, -5.0
    float out[2];
    DequantizeRow(MatrixRef{DType::kBF16, data, 2, 2}, 1, out);
    EXPECT_EQ(out[0], 1.0f);
    EXPECT_EQ(out[1], -5.0f);
  }
  {
    std::vector<uint8_t> data(2 * 34 * 2, 0);
    uint8_t* blk = data.data() + 68 + 34;  // row 1, block 1
    PutU16(blk, 0x3800);                   // d = 0.5
    for (int t = 0; t < 32; ++t) blk[2 + t] = static_cast<uint8_t>(static_cast<int8_t>(t - 16));
    std::vector<float> out(64, -1);
    DequantizeRow(MatrixRef{DType::kQ8_0, data.data(), 2, 64}, 1, out.data());
    for (int t = 0; t < 32; ++t) {
      EXPECT_EQ(out[t], 0.0f);
      EXPECT_EQ(out[32 + t], 0.5f * static_cast<float>(t - 16));
    }
  }
}

TEST(MatMulTest, MatchesFloat64Reference) {
  ThreadPool pool(2);
  uint32_t seed = 1;
  for (Isa isa : SupportedIsas()) {
    ScopedIsa scoped(isa);
    for (DType dtype : kAllTypes) {
      const std::vector<int64_t> ks = BlockOf(dtype) == 256 ? std::vector<int64_t>{256, 512, 1280}
                                      : BlockOf(dtype) == 32
                                          ? std::vector<int64_t>{32, 64, 96, 320, 1024}
                                          : std::vector<int64_t>{1, 3, 17, 33, 100, 256, 1000};
      for (int64_t k : ks) {
        for (int64_t n : {1, 5, 16, 17, 37}) {
          for (int64_t m : {1, 3, 5}) {
            const bool with_bias = (seed % 2) == 0;
            const TestWeights w = MakeWeights(dtype, n, k, ++seed);
            const int64_t x_stride = k + 3;
            const int64_t y_stride = n + 2;
            const std::vector<float> x = RandomFloats(m * x_stride, ++seed);
            const std::vector<float> bias = RandomFloats(n, ++seed);
            constexpr float kSentinel = 12345.0f;
            std::vector<float> y(m * y_stride, kSentinel);
            MatMul(x.data(), m, x_stride, w.ref(), with_bias ? bias.data() : nullptr, y.data(),
                   y_stride, &pool);
            for (int64_t i = 0; i < m; ++i) {
              for (int64_t j = 0; j < n; ++j) {
                double exact = with_bias ? bias[j] : 0.0;
                double abs_sum = 0;
                for (int64_t c = 0; c < k; ++c) {
                  const double p = static_cast<double>(x[i * x_stride + c]) * w.exact[j * k + c];
                  exact += p;
                  abs_sum += std::fabs(p);
                }
                const double bound =
                    ErrorBound(isa, dtype, k, abs_sum, with_bias ? std::fabs(bias[j]) : 0.0);
                ASSERT_NEAR(y[i * y_stride + j], exact, bound)
                    << internal::IsaName(isa) << " " << DTypeName(dtype) << " m=" << m << " n=" << n
                    << " k=" << k << " at (" << i << "," << j << ")";
              }
              for (int64_t j = n; j < y_stride; ++j) ASSERT_EQ(y[i * y_stride + j], kSentinel);
            }
          }
        }
      }
    }
  }
}

TEST(MatMulTest, F32ErrorGrowsLikeSqrtK) {
  // Random-sign data: the error of a long f32 dot product stays near u * sqrt(k) relative
  // to sum |x w|, far inside the worst-case bound above.
  ThreadPool pool(2);
  constexpr int64_t kK = 8192;
  constexpr int64_t kN = 64;
  const TestWeights w = MakeWeights(DType::kF32, kN, kK, 77);
  const std::vector<float> x = RandomFloats(kK, 78);
  for (Isa isa : SupportedIsas()) {
    ScopedIsa scoped(isa);
    std::vector<float> y(kN);
    MatMul(x.data(), 1, kK, w.ref(), nullptr, y.data(), kN, &pool);
    double worst = 0;
    for (int64_t j = 0; j < kN; ++j) {
      double exact = 0;
      double abs_sum = 0;
      for (int64_t c = 0; c < kK; ++c) {
        exact += static_cast<double>(x[c]) * w.exact[j * kK + c];
        abs_sum += std::fabs(static_cast<double>(x[c]) * w.exact[j * kK + c]);
      }
      worst = std::max(worst, std::fabs(y[j] - exact) / abs_sum);
    }
    EXPECT_LT(worst, 1e-6 * std::sqrt(static_cast<double>(kK))) << internal::IsaName(isa);
  }
}

TEST(MatMulTest, Bf16PathRoundsXToBf16) {
  if (!internal::IsaSupported(Isa::kAvx512Bf16)) GTEST_SKIP() << "no avx512bf16";
  ScopedIsa scoped(Isa::kAvx512Bf16);
  constexpr int64_t kK = 200;
  constexpr int64_t kN = 9;
  const TestWeights w = MakeWeights(DType::kBF16, kN, kK, 5);
  const std::vector<float> x = RandomFloats(kK, 6);
  std::vector<float> y(kN);
  MatMul(x.data(), 1, kK, w.ref(), nullptr, y.data(), kN, nullptr);
  for (int64_t j = 0; j < kN; ++j) {
    double exact = 0;
    double abs_sum = 0;
    for (int64_t c = 0; c < kK; ++c) {
      const double p = static_cast<double>(RoundToBf16(x[c])) * w.exact[j * kK + c];
      exact += p;
      abs_sum += std::fabs(p);
    }
    // Without the 2^-8 term: the products of the rounded x are exact in f32.
    EXPECT_NEAR(y[j], exact, ErrorBound(Isa::kAvx512, DType::kF32, 2 * kK, abs_sum, 0));
  }
}

// f16, bf16 and the quantized types are widened (quantized: exactly as DequantizeRow gives
// them) and then run through the f32 arithmetic, so they match the f32 kernel on
// DequantizeRow's output bit for bit.
TEST(MatMulTest, WidenedTypesMatchF32OnDequantizedWeights) {
  ThreadPool pool(2);
  for (Isa isa : SupportedIsas()) {
    ScopedIsa scoped(isa);
    for (DType dtype : kAllTypes) {
      if (UsesDpBf16(isa, dtype) || dtype == DType::kF32) continue;
      const int64_t unit = std::max<int64_t>(32, BlockOf(dtype));
      for (int64_t k : {unit, 3 * unit, 17 * unit}) {
        constexpr int64_t kN = 21;
        constexpr int64_t kM = 6;
        const TestWeights w = MakeWeights(dtype, kN, k, static_cast<uint32_t>(k));
        std::vector<float> dense(kN * k);
        for (int64_t j = 0; j < kN; ++j) DequantizeRow(w.ref(), j, dense.data() + j * k);
        const std::vector<float> x = RandomFloats(kM * k, 9);
        std::vector<float> y(kM * kN);
        std::vector<float> y_dense(kM * kN);
        MatMul(x.data(), kM, k, w.ref(), nullptr, y.data(), kN, &pool);
        MatMul(x.data(), kM, k, MatrixRef{DType::kF32, dense.data(), kN, k}, nullptr,
               y_dense.data(), kN, &pool);
        for (size_t e = 0; e < y.size(); ++e) {
          ASSERT_EQ(FloatBits(y[e]), FloatBits(y_dense[e]))
              << internal::IsaName(isa) << " " << DTypeName(dtype) << " k=" << k << " e=" << e;
        }
      }
    }
  }
}

TEST(MatMulTest, ZeroKGivesBias) {
  ThreadPool pool(2);
  const float bias[] = {1.5f, -2.0f, 3.0f};
  const float x[64] = {};
  float y[64 * 3];
  for (Isa isa : SupportedIsas()) {
    ScopedIsa scoped(isa);
    for (DType dtype : kAllTypes) {
      // 2 rows: the tiles; 16 and 64: the prefill paths; with and without a pool.
      for (int64_t m : {2, 16, 64}) {
        for (ThreadPool* p : {&pool, static_cast<ThreadPool*>(nullptr)}) {
          std::fill(std::begin(y), std::end(y), 7.0f);
          MatMul(x, m, 0, MatrixRef{dtype, nullptr, 3, 0}, bias, y, 3, p);
          for (int64_t i = 0; i < m; ++i) {
            for (int j = 0; j < 3; ++j) {
              ASSERT_EQ(y[i * 3 + j], bias[j]) << DTypeName(dtype) << " m=" << m;
            }
          }
        }
      }
    }
  }
}

// y[i, :] is bit-identical whatever m, the other rows of x, the strides and the thread
// count are.
TEST(MatMulTest, BatchInvariant) {
  std::vector<std::unique_ptr<ThreadPool>> pools;
  for (int threads : {1, 2, 3, 7}) pools.push_back(std::make_unique<ThreadPool>(threads));
  constexpr int64_t kMaxM = 130;
  struct Shape {
    int64_t n, k;
  };
  for (Isa isa : SupportedIsas()) {
    ScopedIsa scoped(isa);
    for (DType dtype : kAllTypes) {
      const std::vector<Shape> shapes =
          BlockOf(dtype) == 256  ? std::vector<Shape>{{37, 256}, {9, 2048}}
          : BlockOf(dtype) == 32 ? std::vector<Shape>{{37, 96}, {9, 2048}}
                                 : std::vector<Shape>{{37, 100}, {9, 2048}, {6, 5003}, {150, 2600}};
      for (const Shape& s : shapes) {
        const TestWeights w = MakeWeights(dtype, s.n, s.k, static_cast<uint32_t>(s.n + s.k));
        const std::vector<float> bias = RandomFloats(s.n, 3);
        const std::vector<float> x = RandomFloats(kMaxM * s.k, 4, -3, 3);
        // Each row alone, single-threaded: the reference.
        std::vector<float> alone(kMaxM * s.n);
        for (int64_t i = 0; i < kMaxM; ++i) {
          MatMul(x.data() + i * s.k, 1, s.k, w.ref(), bias.data(), alone.data() + i * s.n, s.n,
                 nullptr);
        }
        for (int64_t m : {1, 2, 5, 64, 130}) {
          // nullptr: no pool, the caller's thread alone.
          for (ThreadPool* pool : {pools[0].get(), pools[1].get(), pools[2].get(), pools[3].get(),
                                   static_cast<ThreadPool*>(nullptr)}) {
            const int threads = pool != nullptr ? pool->num_threads() : 0;
            // Rows in a wider buffer (another stride), output with another stride too.
            const int64_t x_stride = s.k + 5 + threads;
            std::vector<float> xs(m * x_stride, std::numeric_limits<float>::quiet_NaN());
            for (int64_t i = 0; i < m; ++i) {
              std::copy_n(x.data() + i * s.k, s.k, xs.data() + i * x_stride);
            }
            const int64_t y_stride = s.n + 1;
            std::vector<float> y(m * y_stride);
            MatMul(xs.data(), m, x_stride, w.ref(), bias.data(), y.data(), y_stride, pool);
            for (int64_t i = 0; i < m; ++i) {
              for (int64_t j = 0; j < s.n; ++j) {
                ASSERT_EQ(FloatBits(y[i * y_stride + j]), FloatBits(alone[i * s.n + j]))
                    << internal::IsaName(isa) << " " << DTypeName(dtype) << " k=" << s.k
                    << " m=" << m << " threads=" << threads << " at (" << i << "," << j << ")";
              }
            }
          }
        }
        // Other rows holding NaN, infinities and huge values change nothing in row 0..4.
        std::vector<float> noisy(kMaxM * s.k);
        std::copy_n(x.data(), 5 * s.k, noisy.data());
        const float junk[] = {std::numeric_limits<float>::quiet_NaN(),
                              std::numeric_limits<float>::infinity(), -3e38f, 1e-40f};
        for (int64_t e = 5 * s.k; e < kMaxM * s.k; ++e) noisy[e] = junk[e % 4];
        std::vector<float> y(kMaxM * s.n);
        MatMul(noisy.data(), kMaxM, s.k, w.ref(), bias.data(), y.data(), s.n, pools[1].get());
        for (int64_t e = 0; e < 5 * s.n; ++e) ASSERT_EQ(FloatBits(y[e]), FloatBits(alone[e]));
      }
    }
  }
}

}  // namespace
}  // namespace baton::cpu

namespace baton::cpu {
namespace {

// MatMulShared gives every target exactly MatMul's bits, fused or not (m small and
// large, several thread counts, every ISA and type).
TEST(MatMulTest, SharedEqualsSeparateBitForBit) {
  std::vector<std::unique_ptr<ThreadPool>> pools;
  for (int threads : {1, 2, 3}) pools.push_back(std::make_unique<ThreadPool>(threads));
  for (Isa isa : SupportedIsas()) {
    ScopedIsa scoped(isa);
    for (DType dtype : kAllTypes) {
      const int64_t k = 256;
      const TestWeights q = MakeWeights(dtype, 200, k, 1), kw = MakeWeights(dtype, 72, k, 2),
                        v = MakeWeights(dtype, 40, k, 3);
      const std::vector<float> bias = RandomFloats(200, 5);
      for (int64_t m : {1, 3, 70}) {
        const std::vector<float> x = RandomFloats(m * k, 6, -2, 2);
        for (auto& pool : pools) {
          std::vector<float> yq(m * 200), yk(m * 72), yv(m * 40);
          const MatMulTarget targets[] = {{q.ref(), bias.data(), yq.data(), 200},
                                          {kw.ref(), nullptr, yk.data(), 72},
                                          {v.ref(), nullptr, yv.data(), 40}};
          MatMulShared(x.data(), m, k, targets, pool.get());
          std::vector<float> eq(m * 200), ek(m * 72), ev(m * 40);
          MatMul(x.data(), m, k, q.ref(), bias.data(), eq.data(), 200, pool.get());
          MatMul(x.data(), m, k, kw.ref(), nullptr, ek.data(), 72, pool.get());
          MatMul(x.data(), m, k, v.ref(), nullptr, ev.data(), 40, pool.get());
          const std::string where = std::string(internal::IsaName(isa)) + " " + DTypeName(dtype) +
                                    " m=" + std::to_string(m) +
                                    " threads=" + std::to_string(pool->num_threads());
          for (size_t i = 0; i < eq.size(); ++i)
            ASSERT_EQ(FloatBits(yq[i]), FloatBits(eq[i])) << where;
          for (size_t i = 0; i < ek.size(); ++i)
            ASSERT_EQ(FloatBits(yk[i]), FloatBits(ek[i])) << where;
          for (size_t i = 0; i < ev.size(); ++i)
            ASSERT_EQ(FloatBits(yv[i]), FloatBits(ev[i])) << where;
        }
      }
    }
  }
}

}  // namespace
}  // namespace baton::cpu
