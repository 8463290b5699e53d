// The int8 products of K-quant weights (kernels/cpu/quant_dot.h): the activation rounding
// against ggml's rule, every ISA's product against a float64 reference on the same rounded
// activations, and MatMul's int8 path against the row-by-row dot (batch invariance).
#include "kernels/cpu/quant_dot.h"

#include <gtest/gtest.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "common/thread_pool.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/quant_blocks.h"

namespace baton::cpu {
namespace {

using internal::Isa;

constexpr DType kTypes[] = {DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kQ8_0,
                            DType::kQ4_0, DType::kQ5_0, DType::kQ4_1, DType::kQ5_1};

// Random quants; every f16 scale and minimum a normal half of magnitude 2^-10..2^-5.
std::vector<uint8_t> RandomRows(DType dtype, int64_t rows, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  const BlockLayout layout = LayoutOf(dtype);
  std::vector<uint8_t> bytes(RowBytes(dtype, k) * rows);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  for (size_t at = 0; at < bytes.size(); at += layout.bytes) {
    for (int off : layout.scale_offsets) {
      if (off < 0) continue;
      const auto half =
          static_cast<uint16_t>(((rng() & 1) << 15) | ((5 + rng() % 6) << 10) | (rng() & 1023));
      std::memcpy(&bytes[at + off], &half, 2);
    }
  }
  return bytes;
}

std::vector<float> RandomFloats(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = dist(rng);
  return x;
}

class ScopedIsa {
 public:
  explicit ScopedIsa(Isa isa) { internal::SetIsaForTesting(isa); }
  ~ScopedIsa() { internal::ResetIsaForTesting(); }
};

std::vector<Isa> SupportedIsas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16}) {
    if (internal::IsaSupported(isa)) out.push_back(isa);
  }
  return out;
}

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

TEST(QuantDotTest, QuantizeFollowsGgmlRule) {
  std::vector<float> x = RandomFloats(512, 1);
  x[300] = -7.5f;  // the largest magnitude of block 1, negative
  std::vector<Q8KBlock> q(2);
  QuantizeRowQ8K(x.data(), 512, q.data());
  for (int b = 0; b < 2; ++b) {
    float amax = 0, max = 0;
    for (int j = 0; j < 256; ++j) {
      if (std::fabs(x[256 * b + j]) > amax) {
        amax = std::fabs(x[256 * b + j]);
        max = x[256 * b + j];
      }
    }
    const float iscale = -127.0f / max;
    EXPECT_EQ(Bits(q[b].d), Bits(1.0f / iscale));
    for (int j = 0; j < 256; ++j) {
      const double exact = static_cast<double>(iscale) * x[256 * b + j];
      // Round half to even, and the value of largest magnitude lands on -127.
      EXPECT_LE(std::fabs(q[b].qs[j] - exact), 0.5 + 1e-6) << b << " " << j;
      EXPECT_GE(q[b].qs[j], -127);
    }
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += q[b].qs[16 * g + j];
      EXPECT_EQ(q[b].bsums[g], sum);
    }
  }
  EXPECT_EQ(q[1].qs[300 - 256], -127);  // x = -7.5: iscale = -127 / -7.5, so -127
  std::vector<float> zeros(256, 0.0f);
  QuantizeRowQ8K(zeros.data(), 256, q.data());
  EXPECT_EQ(q[0].d, 0.0f);
  for (int8_t v : q[0].qs) EXPECT_EQ(v, 0);
}

// One row of activations in the blocks `dtype` takes.
struct QuantizedRow {
  std::vector<Q8KBlock> k;
  std::vector<Q8Block32> b32;
};

QuantizedRow Quantize(DType dtype, const float* x, int64_t k) {
  QuantizedRow q;
  if (ActivationBlock(dtype) == kQ8KBlock) {
    q.k.resize(k / 256);
    QuantizeRowQ8K(x, k, q.k.data());
  } else {
    q.b32.resize(k / 32);
    QuantizeRowQ8Block32(x, k, q.b32.data());
  }
  return q;
}

float Dot(DType dtype, const uint8_t* row, const QuantizedRow& q, int64_t k) {
  if (ActivationBlock(dtype) == kQ8KBlock) return DotQ8K(dtype, row, q.k.data(), k / 256);
  return DotQ8Block32(dtype, row, q.b32.data(), k / 32);
}

// The float64 value of the product llama.cpp defines: sum of (dequantized weight) x (d * q)
// over the rounded activations; for Q4_1/Q5_1 the minimum times the block's f16 s instead
// of d * sum(q). *mag: the sum of the terms' magnitudes.
double Reference(DType dtype, const uint8_t* row, const QuantizedRow& q, int64_t k, double* mag) {
  std::vector<float> deq(k);
  DequantizeBlocks(dtype, row, k, deq.data());
  const bool has_min = dtype == DType::kQ4_1 || dtype == DType::kQ5_1;
  const int bytes = LayoutOf(dtype).bytes;
  double ref = 0;
  *mag = 0;
  for (int64_t c = 0; c < k; ++c) {
    double w = deq[c], xv;
    if (ActivationBlock(dtype) == kQ8KBlock) {
      const Q8KBlock& b = q.k[c / 256];
      xv = static_cast<double>(b.d) * b.qs[c % 256];
    } else {
      const Q8Block32& b = q.b32[c / 32];
      xv = static_cast<double>(b.d) * b.qs[c % 32];
      if (has_min) {  // the minimum's part goes through s, once per block
        uint16_t h;
        std::memcpy(&h, row + (c / 32) * bytes + 2, 2);
        w -= internal::HalfToFloat(h);
        if (c % 32 == 0) {
          ref += static_cast<double>(internal::HalfToFloat(h)) * b.s;
          *mag += std::fabs(static_cast<double>(internal::HalfToFloat(h)) * b.s);
        }
      }
    }
    ref += w * xv;
    *mag += std::fabs(w * xv);
  }
  return ref;
}

// On every ISA the product is within f32 rounding of the float64 value over the same
// rounded activations, and the same bits every time.
TEST(QuantDotTest, EveryIsaMatchesFloat64) {
  for (DType dtype : kTypes) {
    for (int64_t k : {256, 2048, 4352}) {
      const std::vector<uint8_t> w = RandomRows(dtype, 3, k, 10 + static_cast<uint32_t>(k));
      const std::vector<float> x = RandomFloats(k, 20 + static_cast<uint32_t>(k));
      const QuantizedRow q = Quantize(dtype, x.data(), k);
      for (int64_t r = 0; r < 3; ++r) {
        const uint8_t* row = w.data() + r * RowBytes(dtype, k);
        double mag = 0;
        const double ref = Reference(dtype, row, q, k, &mag);
        for (Isa isa : SupportedIsas()) {
          ScopedIsa scoped(isa);
          const float got = Dot(dtype, row, q, k);
          EXPECT_NEAR(got, ref, 1e-5 * mag + 1e-30)
              << DTypeName(dtype) << " k=" << k << " isa=" << internal::IsaName(isa);
          EXPECT_EQ(Bits(Dot(dtype, row, q, k)), Bits(got));  // deterministic
        }
      }
    }
  }
}

TEST(QuantDotTest, Block32RoundingIsGgmls) {
  std::vector<float> x = RandomFloats(64, 3);
  x[5] = 0.0f;
  std::vector<float> zeros(32, 0.0f);
  std::copy(zeros.begin(), zeros.end(), x.begin() + 32);
  std::vector<Q8Block32> q(2);
  QuantizeRowQ8Block32(x.data(), 64, q.data());
  float amax = 0;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  int sum = 0;
  for (int j = 0; j < 32; ++j) {
    EXPECT_LE(std::fabs(q[0].qs[j] - static_cast<double>(x[j]) * (127.0f / amax)), 0.5 + 1e-6);
    sum += q[0].qs[j];
  }
  EXPECT_EQ(q[0].sum, sum);
  EXPECT_EQ(q[0].d, internal::HalfToFloat(internal::FloatToHalf(amax / 127.0f)));
  EXPECT_NEAR(q[0].s, q[0].d * sum, std::fabs(q[0].d * sum) * 1e-3);
  EXPECT_EQ(q[1].d, 0.0f);
  EXPECT_EQ(q[1].sum, 0);
}

#if defined(__x86_64__)
__attribute__((target("f16c"))) uint16_t HardwareFloatToHalf(float f) { return _cvtss_sh(f, 0); }
#endif

// The software f32 -> f16 rounding is to nearest, and equals F16C's where the CPU has it.
TEST(QuantDotTest, FloatToHalfMatchesF16c) {
  std::mt19937 rng(5);
  std::vector<float> values = {0.0f,     -0.0f,    1.0f,    65504.0f, 65519.9f, 65520.0f, 1e-8f,
                               5.96e-8f, 2.98e-8f, 6.1e-5f, 6.0e-5f,  INFINITY, -INFINITY};
  for (int i = 0; i < 200000; ++i) {
    uint32_t b = static_cast<uint32_t>(rng());
    float f;
    std::memcpy(&f, &b, 4);
    if (!std::isnan(f)) values.push_back(f);
  }
  for (float f : values) {
    const uint16_t mine = internal::FloatToHalf(f);
#if defined(__x86_64__)
    if (GetCpuFeatures().f16c) {
      ASSERT_EQ(mine, HardwareFloatToHalf(f)) << f;
    }
#endif
    if (std::fabs(f) < 65504.0f) {
      // Round to nearest: no f16 lies strictly closer.
      const double got = internal::HalfToFloat(mine);
      const double up = internal::HalfToFloat(static_cast<uint16_t>(mine + 1));
      EXPECT_LE(std::fabs(got - f), std::fabs(up - f) + 1e-30) << f;
    }
  }
}

// MatMul with int8_activations: each y[i, j] is the row's own dot, whatever m, the pool,
// the ISA or the other rows; MatMulShared gives the same bits. m = 17 and 40 take the
// tiled kernels (16 rows and up: AVX-512 VNNI's, or AVX2's), with rows left over their
// groups of 2 or 4; n = 70 leaves 6 columns to the row-by-row kernel.
TEST(QuantDotTest, MatMulIsTheRowDotBatchInvariant) {
  ThreadPool pool(3);
  const int64_t n = 70;
  for (DType dtype : kTypes) {
    const int64_t k = ActivationBlock(dtype) == kQ8KBlock ? 512 : 576;
    const std::vector<uint8_t> w = RandomRows(dtype, n, k, 7);
    MatrixRef ref{dtype, w.data(), n, k};
    ref.int8_activations = true;
    const std::vector<float> bias = RandomFloats(n, 8);
    const std::vector<float> x = RandomFloats(40 * k, 9);
    for (Isa isa : SupportedIsas()) {
      ScopedIsa scoped(isa);
      std::vector<float> expected(40 * n);
      for (int64_t i = 0; i < 40; ++i) {
        const QuantizedRow q = Quantize(dtype, x.data() + i * k, k);
        for (int64_t j = 0; j < n; ++j) {
          expected[i * n + j] = Dot(dtype, w.data() + j * RowBytes(dtype, k), q, k) + bias[j];
        }
      }
      for (int64_t m : {1, 3, 17, 40}) {
        for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
          std::vector<float> y(m * n, -1.0f);
          MatMul(x.data(), m, k, ref, bias.data(), y.data(), n, p);
          for (int64_t e = 0; e < m * n; ++e) {
            ASSERT_EQ(Bits(y[e]), Bits(expected[e])) << DTypeName(dtype) << " m=" << m << " e=" << e
                                                     << " isa=" << internal::IsaName(isa);
          }
          std::vector<float> y2(m * n, -1.0f);
          const MatMulTarget targets[] = {{ref, bias.data(), y2.data(), n},
                                          {ref, nullptr, y.data(), n}};
          MatMulShared(x.data(), m, k, targets, p);
          for (int64_t e = 0; e < m * n; ++e) ASSERT_EQ(Bits(y2[e]), Bits(expected[e]));
        }
      }
    }
  }
}

// The products add each block's exact integer sums in one f32 order (AddBlockK for the
// K-quants, FinishLanes8's lanes for the 32-value types), so every ISA's kernels, row by
// row or tiled, give the same bits as the plain loops. k = 1056 leaves an odd number of
// 32-value blocks (33) and a last group of one in the lanes.
TEST(QuantDotTest, ProductsHaveTheSameBitsOnEveryIsa) {
  const int64_t n = 48, m = 21;
  for (DType dtype : kTypes) {
    const int64_t k = ActivationBlock(dtype) == kQ8KBlock ? 1024 : 1056;
    const std::vector<uint8_t> w = RandomRows(dtype, n, k, 11);
    MatrixRef ref{dtype, w.data(), n, k};
    ref.int8_activations = true;
    const std::vector<float> x = RandomFloats(m * k, 12);
    std::vector<float> plain(m * n);
    {
      ScopedIsa scoped(Isa::kScalar);
      MatMul(x.data(), m, k, ref, nullptr, plain.data(), n, nullptr);
    }
    for (Isa isa : SupportedIsas()) {
      ScopedIsa scoped(isa);
      for (int64_t rows : {int64_t{1}, m}) {
        std::vector<float> y(rows * n, -1.0f);
        MatMul(x.data(), rows, k, ref, nullptr, y.data(), n, nullptr);
        for (int64_t e = 0; e < rows * n; ++e) {
          ASSERT_EQ(Bits(y[e]), Bits(plain[e])) << DTypeName(dtype) << " rows=" << rows
                                                << " e=" << e << " isa=" << internal::IsaName(isa);
        }
      }
    }
  }
}

// The tiled kernels add several vpmaddubsw pairs in 16 bits before widening them; at the
// largest quants (every bit set; Q8_0's -128) against activations of magnitude 127 they
// still give the plain loops' bits on every ISA.
TEST(QuantDotTest, LargestQuantsStayExact) {
  const int64_t n = 32, m = 20;
  for (DType dtype : kTypes) {
    const int64_t k = ActivationBlock(dtype) == kQ8KBlock ? 512 : 576;
    std::vector<uint8_t> w = RandomRows(dtype, n, k, 13);
    const BlockLayout layout = LayoutOf(dtype);
    for (size_t at = 0; at < w.size(); at += layout.bytes) {
      for (int b = 0; b < layout.bytes; ++b) {
        const bool scale =
            std::any_of(std::begin(layout.scale_offsets), std::end(layout.scale_offsets),
                        [&](int off) { return off >= 0 && b >= off && b < off + 2; });
        if (!scale) w[at + b] = dtype == DType::kQ8_0 ? 0x80 : 0xff;
      }
    }
    MatrixRef ref{dtype, w.data(), n, k};
    ref.int8_activations = true;
    std::vector<float> x(m * k);
    for (int64_t i = 0; i < m; ++i) {
      std::fill_n(x.begin() + i * k, k, (i % 2 == 0 ? 1.0f : -1.0f) * static_cast<float>(1 + i));
    }
    std::vector<float> plain(m * n);
    {
      ScopedIsa scoped(Isa::kScalar);
      MatMul(x.data(), m, k, ref, nullptr, plain.data(), n, nullptr);
    }
    for (Isa isa : SupportedIsas()) {
      ScopedIsa scoped(isa);
      std::vector<float> y(m * n, -1.0f);
      MatMul(x.data(), m, k, ref, nullptr, y.data(), n, nullptr);
      for (int64_t e = 0; e < m * n; ++e) {
        ASSERT_EQ(Bits(y[e]), Bits(plain[e]))
            << DTypeName(dtype) << " e=" << e << " isa=" << internal::IsaName(isa);
      }
    }
  }
}

// The SIMD quantization of activations gives the plain loops' bits: random rows, rows with
// ties for the largest magnitude (the first one wins), products that are exact halves
// (round to even) in both block types, -0.0, a zero block, NaNs and infinities.
TEST(QuantDotTest, QuantizationHasTheSameBitsOnEveryIsa) {
  const int64_t k = 1024;
  std::vector<std::vector<float>> rows = {RandomFloats(k, 30), RandomFloats(k, 31)};
  std::vector<float> ties(k);
  for (int64_t j = 0; j < k; ++j) ties[j] = static_cast<float>((j * 37) % 255 - 127) * 0.5f;
  for (int64_t b = 0; b < k; b += 256) {  // the same magnitude twice: the first one wins
    ties[b + 40 + b / 64] = -1000.0f;
    ties[b + 200] = 1000.0f;
  }
  rows.push_back(ties);
  // Largest magnitude 127 first in every block of 32: both scales are 1, every product is
  // the value itself, and j - 100.5 is a half.
  std::vector<float> halves(k);
  for (int64_t j = 0; j < k; ++j) halves[j] = static_cast<float>(j % 200) - 100.5f;
  for (int64_t j = 0; j < k; j += 32) halves[j] = -127.0f;
  halves[5] = -0.0f;
  rows.push_back(halves);
  std::vector<float> odd = RandomFloats(k, 32);
  std::fill_n(odd.begin() + 256, 256, 0.0f);
  odd[3] = std::nanf("");
  odd[600] = std::numeric_limits<float>::infinity();
  odd[700] = -65536.0f;
  rows.push_back(odd);
  for (const std::vector<float>& x : rows) {
    std::vector<Q8KBlock> plain_k(k / 256), got_k(k / 256);
    std::vector<Q8Block32> plain_32(k / 32), got_32(k / 32);
    {
      ScopedIsa scoped(Isa::kScalar);
      QuantizeRowQ8K(x.data(), k, plain_k.data());
      QuantizeRowQ8Block32(x.data(), k, plain_32.data());
    }
    for (Isa isa : SupportedIsas()) {
      ScopedIsa scoped(isa);
      QuantizeRowQ8K(x.data(), k, got_k.data());
      QuantizeRowQ8Block32(x.data(), k, got_32.data());
      for (int64_t b = 0; b < k / 256; ++b) {
        // Bit for bit, the scale's sign and NaN payload included: memcmp on purpose.
        // NOLINTNEXTLINE(bugprone-suspicious-memory-comparison)
        ASSERT_EQ(std::memcmp(&got_k[b], &plain_k[b], sizeof(Q8KBlock)), 0)
            << "Q8K block " << b << " isa=" << internal::IsaName(isa);
      }
      for (int64_t b = 0; b < k / 32; ++b) {
        // NOLINTNEXTLINE(bugprone-suspicious-memory-comparison)
        ASSERT_EQ(std::memcmp(&got_32[b], &plain_32[b], sizeof(Q8Block32)), 0)
            << "block32 " << b << " isa=" << internal::IsaName(isa);
      }
    }
  }
}

TEST(QuantDotTest, WhichTypesHaveTheProduct) {
  EXPECT_EQ(ActivationBlock(DType::kQ4_K), 256);
  EXPECT_EQ(ActivationBlock(DType::kQ6_K), 256);
  EXPECT_EQ(ActivationBlock(DType::kQ8_0), 32);
  EXPECT_EQ(ActivationBlock(DType::kQ5_1), 32);
  EXPECT_FALSE(HasInt8Product(DType::kQ2_K));
  EXPECT_FALSE(HasInt8Product(DType::kQ3_K));
  EXPECT_FALSE(HasInt8Product(DType::kBF16));
}

}  // namespace
}  // namespace baton::cpu
