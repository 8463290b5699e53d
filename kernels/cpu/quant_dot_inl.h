// The integer part of a K-quant block times a Q8K block (quant_dot.h), as plain loops: the
// reference the SIMD files are tested against, and what the scalar ISA runs. Internal
// linkage, one copy per includer (matmul_internal.h says why).
//
// Per 256-value block b of the row:
//   Q4_K, Q5_K: sumi = sum over the 8 groups of 32 of scale * sum(q * x8), q unsigned;
//               summins = sum over the 8 groups of min * (the group's x8 sum)
//   Q6_K:       sumi = sum over the 16 groups of 16 of scale * sum((q - 32) * x8); summins 0
// and the block adds d_x * d * sumi - d_x * dmin * summins (AddBlockK's order).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cpu/quant_blocks_inl.h"
#include "kernels/cpu/quant_dot.h"

namespace baton::cpu::internal {
namespace {  // NOLINT(google-build-namespaces): one copy per including file is the point.

// Q4_K and Q5_K: element 64 * p + l (l < 32) of a block is the low nibble of qs[32 p + l]
// (group 2 p), element 64 * p + 32 + l the high nibble (group 2 p + 1); Q5_K's fifth bit is
// bit 2 p (low) or 2 p + 1 (high) of qh[l].
template <bool kFive>
inline void SumsQ45K(const uint8_t* b, const Q8KBlock& x, int32_t* sumi, int32_t* summins) {
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + (kFive ? 48 : 16);
  int32_t si = 0, sm = 0;
  for (int p = 0; p < 4; ++p) {
    int sc0, m0, sc1, m1;
    ScaleMinK4(2 * p, scales, &sc0, &m0);
    ScaleMinK4(2 * p + 1, scales, &sc1, &m1);
    int32_t lo = 0, hi = 0;
    for (int l = 0; l < 32; ++l) {
      int q0 = qs[32 * p + l] & 0x0f, q1 = qs[32 * p + l] >> 4;
      if constexpr (kFive) {
        q0 |= ((qh[l] >> (2 * p)) & 1) << 4;
        q1 |= ((qh[l] >> (2 * p + 1)) & 1) << 4;
      }
      lo += q0 * x.qs[64 * p + l];
      hi += q1 * x.qs[64 * p + 32 + l];
    }
    si += sc0 * lo + sc1 * hi;
    sm +=
        m0 * (x.bsums[4 * p] + x.bsums[4 * p + 1]) + m1 * (x.bsums[4 * p + 2] + x.bsums[4 * p + 3]);
  }
  *sumi = si;
  *summins = sm;
}

// Q6_K: in each half of 128, element 32 * part + l takes its low nibble from ql[l] or
// ql[l + 32] and its top two bits from qh[l] (as DequantQ6_K); group (element / 16) has
// the int8 scale sc[group].
inline void SumsQ6K(const uint8_t* b, const Q8KBlock& x, int32_t* sumi, int32_t* summins) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
  int32_t si = 0;
  for (int half = 0; half < 2; ++half) {
    for (int part = 0; part < 4; ++part) {
      const uint8_t* low = ql + 64 * half + (part & 1) * 32;
      const int low_shift = (part >> 1) * 4;
      for (int g = 0; g < 2; ++g) {
        int32_t s = 0;
        for (int l = 16 * g; l < 16 * g + 16; ++l) {
          const int q =
              (((low[l] >> low_shift) & 0x0f) | (((qh[32 * half + l] >> (2 * part)) & 3) << 4)) -
              32;
          s += q * x.qs[128 * half + 32 * part + l];
        }
        si += sc[8 * half + 2 * part + g] * s;
      }
    }
  }
  *sumi = si;
  *summins = 0;
}

// The f32 part of the K-quants' products, in the one order every kernel keeps: block b
// adds its exact integer sums to lane b % 4 of two sets of running sums, d_x * d times sumi
// to one and d_x * dmin times summins to the other (a fused multiply-add each), and the
// row's value is ((d0 + d2) + (d1 + d3)) - ((m0 + m2) + (m1 + m3)). So a y[i, j] has the
// same bits whichever kernel made it (the row-by-row kernels of decode, four blocks per
// vector; the tiled one of prefill, a column per lane) on every ISA, and the int8 products
// stay batch invariant. Four lanes, so decode's row is not one chain of dependent
// multiply-adds. Q6_K has no mins (summins 0).
struct KSums {
  float d[4] = {};
  float m[4] = {};
};

inline void AddBlockK(KSums* s, int64_t b, float dx, float d, float dmin, int32_t sumi,
                      int32_t summins) {
  const int64_t l = b % 4;
  s->d[l] = std::fma(dx * d, static_cast<float>(sumi), s->d[l]);
  s->m[l] = std::fma(dx * dmin, static_cast<float>(summins), s->m[l]);
}

inline float FinishK(const float d[4], const float m[4]) {
  return ((d[0] + d[2]) + (d[1] + d[3])) - ((m[0] + m[2]) + (m[1] + m[3]));
}

inline void BlockSumsPlain(DType dtype, const uint8_t* row, const Q8KBlock* x, int64_t blocks,
                           int32_t* sumi, int32_t* summins) {
  const size_t bytes = static_cast<size_t>(LayoutOf(dtype).bytes);
  for (int64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = row + i * bytes;
    switch (dtype) {
      case DType::kQ4_K:
        SumsQ45K<false>(b, x[i], sumi + i, summins + i);
        break;
      case DType::kQ5_K:
        SumsQ45K<true>(b, x[i], sumi + i, summins + i);
        break;
      case DType::kQ6_K:
        SumsQ6K(b, x[i], sumi + i, summins + i);
        break;
      default:
        sumi[i] = summins[i] = 0;
    }
  }
}

// A 32-value weight block's quants (element j of 32), before any offset: Q4_0/Q4_1 the
// nibble (byte j low for j < 16, byte j - 16 high after), Q5_0/Q5_1 with bit j of qh as
// the fifth bit, Q8_0 the signed byte.
inline int LegacyQuant(DType dtype, const uint8_t* b, int j) {
  const int half = j < 16 ? 0 : 4;
  switch (dtype) {
    case DType::kQ8_0:
      return static_cast<int8_t>(b[2 + j]);
    case DType::kQ4_0:
      return (b[2 + j % 16] >> half) & 0x0f;
    case DType::kQ4_1:
      return (b[4 + j % 16] >> half) & 0x0f;
    case DType::kQ5_0:
      return ((b[6 + j % 16] >> half) & 0x0f) | (((U32At(b + 2) >> j) & 1) << 4);
    case DType::kQ5_1:
      return ((b[8 + j % 16] >> half) & 0x0f) | (((U32At(b + 4) >> j) & 1) << 4);
    default:
      return 0;
  }
}

// The 32-value types' f32 part, in the one order every kernel keeps (as AddBlockK for the
// K-quants): block i goes to running sum i % 8, a fused multiply-add of d_w * d_x times
// the block's integer sum, then, for the types with a minimum, one of m_w times s_x; the
// eight sums are added at the end as ((0 + 4) + (2 + 6)) + ((1 + 5) + (3 + 7)). Eight, so
// the row-by-row kernels keep eight blocks' sums in one AVX2 register (a block is only 32
// products: one running sum would be a chain of dependent multiply-adds).
inline float FinishLanes8(const float l[8]) {
  return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

// The plain product of one 32-value-type row with Q8Block32 rows: per block the integer
// sum((q - offset) * x8), in FinishLanes8's order.
inline float DotLegacyPlain(DType dtype, const uint8_t* row, const Q8Block32* x, int64_t blocks) {
  const int bytes = LayoutOf(dtype).bytes;
  const int offset = dtype == DType::kQ4_0 ? 8 : dtype == DType::kQ5_0 ? 16 : 0;
  const bool has_min = dtype == DType::kQ4_1 || dtype == DType::kQ5_1;
  float lanes[8] = {};
  for (int64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = row + i * bytes;
    int32_t sumi = 0;
    for (int j = 0; j < 32; ++j) sumi += (LegacyQuant(dtype, b, j) - offset) * x[i].qs[j];
    float& l = lanes[i % 8];
    l = std::fma(HalfAt(b) * x[i].d, static_cast<float>(sumi), l);
    if (has_min) l = std::fma(HalfAt(b + 2), x[i].s, l);
  }
  return FinishLanes8(lanes);
}

}  // namespace
}  // namespace baton::cpu::internal
