#include "model/float_convert.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace baton::model {
namespace {

TEST(FloatConvertTest, F16RoundTripsEveryValue) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = F16ToF32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(F16ToF32(F32ToF16(f)))) << h;
      continue;
    }
    EXPECT_EQ(F32ToF16(f), h) << h;
  }
}

TEST(FloatConvertTest, F16RoundsToNearestEven) {
  EXPECT_EQ(F32ToF16(1.0f), 0x3c00);
  EXPECT_EQ(F32ToF16(-2.0f), 0xc000);
  EXPECT_EQ(F32ToF16(65504.0f), 0x7bff);
  EXPECT_EQ(F32ToF16(65519.0f), 0x7bff);
  EXPECT_EQ(F32ToF16(65520.0f), 0x7c00);  // rounds to infinity
  EXPECT_EQ(F32ToF16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(F32ToF16(std::ldexp(1.0f, -24)), 0x0001);         // smallest subnormal
  EXPECT_EQ(F32ToF16(std::ldexp(1.0f, -25)), 0x0000);         // tie: to even (zero)
  EXPECT_EQ(F32ToF16(std::ldexp(3.0f, -25)), 0x0002);         // tie: to even (2)
  EXPECT_EQ(F32ToF16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie between 1 and next
  EXPECT_EQ(F32ToF16(1.0f + std::ldexp(3.0f, -11)), 0x3c02);
  EXPECT_EQ(F32ToF16(std::ldexp(1.0f, -14) * (1 - std::ldexp(1.0f, -12))), 0x0400);
  EXPECT_TRUE(std::isnan(F16ToF32(F32ToF16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(FloatConvertTest, Bf16) {
  EXPECT_EQ(F32ToBf16(1.0f), 0x3f80);
  EXPECT_EQ(Bf16ToF32(0x3f80), 1.0f);
  EXPECT_EQ(F32ToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);  // tie: to even
  EXPECT_EQ(F32ToBf16(1.0f + std::ldexp(3.0f, -8)), 0x3f82);
  EXPECT_EQ(F32ToBf16(-3.0f), 0xc040);
  EXPECT_TRUE(std::isnan(Bf16ToF32(F32ToBf16(std::numeric_limits<float>::quiet_NaN()))));
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const float f = Bf16ToF32(static_cast<uint16_t>(b));
    if (!std::isnan(f)) {
      EXPECT_EQ(F32ToBf16(f), b) << b;
    }
  }
}

TEST(FloatConvertTest, Q8_0) {
  std::vector<float> x(64);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = std::sin(static_cast<float>(i)) * (i < 32 ? 1 : 0.01f);
  std::vector<uint8_t> blocks(2 * kQ8BlockBytes);
  QuantizeQ8_0(x, blocks.data());
  std::vector<float> y(64);
  DequantizeQ8_0(blocks.data(), 64, y.data());
  for (size_t i = 0; i < x.size(); ++i) {
    const float amax = i < 32 ? 1.0f : 0.01f;
    EXPECT_NEAR(y[i], x[i], amax / 127 * 0.5f + amax / 2048) << i;
  }
  std::vector<float> zeros(32, 0.0f);
  QuantizeQ8_0(zeros, blocks.data());
  DequantizeQ8_0(blocks.data(), 32, y.data());
  EXPECT_EQ(y[0], 0.0f);
}

}  // namespace
}  // namespace baton::model
