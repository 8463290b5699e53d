#include "model/float_convert.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

namespace baton::model {

float F16ToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  const uint32_t mant = h & 0x3ff;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24, exact in f32.
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign != 0 ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));  // inf/NaN
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t F32ToF16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  x &= 0x7fffffff;
  if (x >= 0x7f800000) {  // inf stays inf; NaN stays a (quiet) NaN
    return static_cast<uint16_t>(sign | 0x7c00 | (x > 0x7f800000 ? 0x200 : 0));
  }
  if (x >= 0x477ff000) return static_cast<uint16_t>(sign | 0x7c00);  // >= 65520 rounds to inf
  if (x < 0x38800000) {
    // Below the smallest normal (2^-14): f16 subnormals are multiples of 2^-24. Scaling by
    // 2^24 is exact; nearbyint rounds to nearest even. 0x400 (the smallest normal) is the
    // right encoding when it rounds up.
    const float scaled = std::bit_cast<float>(x) * 16777216.0f;
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(scaled)));
  }
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped mantissa bits to
  // nearest even; a carry out of the mantissa correctly bumps the exponent.
  const uint32_t odd = (x >> 13) & 1;
  x += 0xc8000000u + 0xfff + odd;
  return static_cast<uint16_t>(sign | (x >> 13));
}

float Bf16ToF32(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

uint16_t F32ToBf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet NaN
  return static_cast<uint16_t>((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

void QuantizeQ8_0(std::span<const float> x, uint8_t* out) {
  const size_t blocks = x.size() / kQ8BlockElems;
  for (size_t b = 0; b < blocks; ++b) {
    const float* v = x.data() + b * kQ8BlockElems;
    float amax = 0.0f;
    for (int i = 0; i < kQ8BlockElems; ++i) amax = std::max(amax, std::fabs(v[i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    uint8_t* block = out + b * kQ8BlockBytes;
    const uint16_t dh = F32ToF16(d);
    std::memcpy(block, &dh, 2);
    for (int i = 0; i < kQ8BlockElems; ++i) {
      const auto q = static_cast<int8_t>(std::lround(v[i] * id));
      std::memcpy(block + 2 + i, &q, 1);
    }
  }
}

void DequantizeQ8_0(const uint8_t* blocks, int64_t n, float* out) {
  for (int64_t b = 0; b < n / kQ8BlockElems; ++b) {
    const uint8_t* block = blocks + b * kQ8BlockBytes;
    uint16_t dh;
    std::memcpy(&dh, block, 2);
    const float d = F16ToF32(dh);
    for (int i = 0; i < kQ8BlockElems; ++i) {
      int8_t q;
      std::memcpy(&q, block + 2 + i, 1);
      out[b * kQ8BlockElems + i] = d * static_cast<float>(q);
    }
  }
}

}  // namespace baton::model
