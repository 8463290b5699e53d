// f32 -> bf16 as the KV cache writes it (kernels/cpu/bf16.h) against a reference written
// from the definition of rounding, on every ISA path: ties to even, subnormals, overflow,
// inf, and the canonical NaN that CUDA's __float2bfloat16_rn returns.
#include "kernels/cpu/bf16.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/matmul.h"

namespace baton::cpu {
namespace {

// The bf16 nearest to f, ties to even, by arithmetic on doubles: bf16 keeps 8
// significant bits down to 2^-126 and steps of 2^-133 below (subnormals); past the largest
// finite bf16 and half a step it is inf. Every NaN is 0x7FFF, as CUDA's.
uint16_t Reference(float f) {
  if (std::isnan(f)) return 0x7fff;
  const double x = f;
  if (std::isinf(x) || x == 0) return static_cast<uint16_t>(std::bit_cast<uint32_t>(f) >> 16);
  int e = 0;
  std::frexp(x, &e);  // |x| = m * 2^e, m in [0.5, 1)
  const double ulp = std::ldexp(1.0, std::max(e - 8, -133));
  const double r = std::nearbyint(x / ulp) * ulp;  // the default mode: ties to even
  if (std::abs(r) >= std::ldexp(1.0, 128)) return x > 0 ? 0x7f80 : 0xff80;
  const uint32_t bits = std::bit_cast<uint32_t>(static_cast<float>(r));  // exact
  EXPECT_EQ(bits & 0xffff, 0u) << "the reference must land on a bf16";
  // A result of zero keeps the sign of f (nearbyint(-0.3) is -0).
  return static_cast<uint16_t>(bits >> 16);
}

// Floats that probe every rounding case: for each upper half, the lower halves just
// below, at and above the tie, and the extremes.
std::vector<float> Probes() {
  std::vector<float> out;
  std::mt19937 rng(17);
  for (uint32_t hi = 0; hi <= 0xffff; ++hi) {
    for (uint32_t lo : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu,
                        static_cast<uint32_t>(rng() & 0xffff)}) {
      out.push_back(std::bit_cast<float>(hi << 16 | lo));
    }
  }
  return out;
}

TEST(Bf16Test, RoundsToNearestEvenAsTheReference) {
  for (const float f : Probes()) {
    ASSERT_EQ(FloatToBf16(f).bits, Reference(f)) << std::hex << std::bit_cast<uint32_t>(f);
  }
}

TEST(Bf16Test, CasesCudaDefines) {
  const auto bits = [](float f) { return FloatToBf16(f).bits; };
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(bits(1.0f), 0x3f80);
  EXPECT_EQ(bits(-2.5f), 0xc020);
  // Ties: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7 and goes to the even 1; the next
  // tie up goes to the even 1 + 2^-6.
  EXPECT_EQ(bits(std::bit_cast<float>(0x3f808000u)), 0x3f80);
  EXPECT_EQ(bits(std::bit_cast<float>(0x3f818000u)), 0x3f82);
  EXPECT_EQ(bits(std::bit_cast<float>(0x3f808001u)), 0x3f81);  // above the tie: up
  EXPECT_EQ(bits(inf), 0x7f80);
  EXPECT_EQ(bits(-inf), 0xff80);
  EXPECT_EQ(bits(std::numeric_limits<float>::max()), 0x7f80) << "overflows to inf";
  EXPECT_EQ(bits(std::bit_cast<float>(0x7f7f7fffu)), 0x7f7f) << "the largest that stays finite";
  // Every NaN, quiet or signalling, of either sign and any payload: the canonical 0x7FFF.
  for (const uint32_t nan : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff812345u, 0x7fffffffu}) {
    EXPECT_EQ(bits(std::bit_cast<float>(nan)), 0x7fff) << std::hex << nan;
  }
  // Subnormals are kept, not flushed: the smallest f32 subnormal rounds to +0, and a
  // bf16 subnormal stays itself.
  EXPECT_EQ(bits(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(bits(-std::numeric_limits<float>::denorm_min()), 0x8000);
  EXPECT_EQ(bits(std::bit_cast<float>(0x00010000u)), 0x0001);
  EXPECT_EQ(bits(std::bit_cast<float>(0x00018000u)), 0x0002) << "a subnormal tie goes to even";
  EXPECT_EQ(bits(-0.0f), 0x8000);
}

TEST(Bf16Test, WideningIsExact) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const float f = Bf16ToFloat(Bf16{static_cast<uint16_t>(b)});
    ASSERT_EQ(std::bit_cast<uint32_t>(f), b << 16);
    if (!std::isnan(f)) {
      ASSERT_EQ(FloatToBf16(f).bits, b) << "a bf16 rounds to itself";
    }
  }
}

// The row conversion (the KV writes) gives the scalar bits on every ISA, for every length
// around the vector width (the masked tails) and at any alignment.
TEST(Bf16Test, RowsEqualTheScalarOnEveryIsa) {
  const std::vector<float> probes = Probes();
  for (const auto isa : {internal::Isa::kScalar, internal::Isa::kAvx2, internal::Isa::kAvx512,
                         internal::Isa::kAvx512Bf16}) {
    if (!internal::IsaSupported(isa)) continue;
    internal::SetIsaForTesting(isa);
    std::vector<Bf16> out(probes.size() + 1);
    FloatToBf16Row(probes.data(), static_cast<int64_t>(probes.size()), out.data());
    for (size_t i = 0; i < probes.size(); ++i) {
      ASSERT_EQ(out[i].bits, Reference(probes[i]))
          << internal::IsaName(isa) << " " << std::hex << std::bit_cast<uint32_t>(probes[i]);
    }
    for (int64_t n = 0; n <= 40; ++n) {
      for (int64_t offset : {0, 1, 3}) {
        std::vector<Bf16> row(n + 2, Bf16{0x1234});
        FloatToBf16Row(probes.data() + 1000 + offset, n, row.data() + 1);
        EXPECT_EQ(row[0].bits, 0x1234) << "nothing written before the row";
        EXPECT_EQ(row[n + 1].bits, 0x1234) << "nothing written past the row, n " << n;
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_EQ(row[i + 1].bits, FloatToBf16(probes[1000 + offset + i]).bits)
              << internal::IsaName(isa) << " n " << n << " i " << i;
        }
      }
    }
  }
  internal::ResetIsaForTesting();
}

}  // namespace
}  // namespace baton::cpu
