// Helpers shared by the SIMD files of the int8 products (quant_dot_<isa>.cc), which are
// compiled with AVX2 and F16C at least. Internal linkage: one copy per including file
// (matmul_internal.h says why).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/quant_dot.h"

namespace baton::cpu::internal {
namespace {  // NOLINT(google-build-namespaces): one copy per including file is the point.

inline float Half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

inline __m256i Load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

inline float Sum4(__m128 s) {
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Bit `from` of every byte of v at bit 4 (other bits garbage; the caller masks).
inline __m256i BitTo4(__m256i v, int from) {
  if (from < 4) return _mm256_slli_epi16(v, 4 - from);
  if (from > 4) return _mm256_srli_epi16(v, from - 4);
  return v;
}

// The 6-bit scales and mins of a Q4_K/Q5_K block (12 packed bytes) as 8 + 8 bytes, in
// out[0..1] and out[2..3] (ScaleMinK4 for every j at once).
inline void UnpackScales(const uint8_t* packed, uint32_t out[4]) {
  constexpr uint32_t kLow6 = 0x3f3f3f3f, kLow4 = 0x0f0f0f0f, kLow2 = 0x03030303;
  uint32_t u[3];
  std::memcpy(u, packed, 12);
  out[0] = u[0] & kLow6;
  out[1] = (u[2] & kLow4) | (((u[0] >> 6) & kLow2) << 4);
  out[2] = u[1] & kLow6;
  out[3] = ((u[2] >> 4) & kLow4) | (((u[1] >> 6) & kLow2) << 4);
}

// The scales and mins of UnpackScales widened to 16 lanes of 16 bits: scales in lanes
// 0-7, mins in lanes 8-15.
inline __m256i ScalesAndMins(const uint8_t* packed) {
  uint32_t u[4];
  UnpackScales(packed, u);
  return _mm256_cvtepu8_epi16(_mm_setr_epi32(static_cast<int>(u[0]), static_cast<int>(u[1]),
                                             static_cast<int>(u[2]), static_cast<int>(u[3])));
}

// The 64 quants of group pair p (groups 2p and 2p + 1) of a Q4_K/Q5_K block, 0-15 or 0-31:
// low nibbles (group 2p) in *lo, high nibbles in *hi; Q5_K's fifth bit is bit 2p or 2p + 1
// of the 32 qh bytes in `high`.
template <bool kFive>
inline void PairQuants(const uint8_t* qs, __m256i high, int p, __m256i* lo, __m256i* hi) {
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  const __m256i bits = Load(qs + 32 * p);
  *lo = _mm256_and_si256(bits, nibble);
  *hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), nibble);
  if constexpr (kFive) {
    const __m256i bit = _mm256_set1_epi8(0x10);
    *lo = _mm256_or_si256(*lo, _mm256_and_si256(BitTo4(high, 2 * p), bit));
    *hi = _mm256_or_si256(*hi, _mm256_and_si256(BitTo4(high, 2 * p + 1), bit));
  }
}

// The mins' part of a Q4_K/Q5_K block against one Q8K block, into 4 f32 lanes:
// -d_x * dmin * sum over groups of min * (the group's sum of 32, from the sums of 16).
inline __m128 AddMins(__m128 acc, __m128i mins, const Q8KBlock& x, float dmin) {
  const __m256i bsums = Load(x.bsums);
  const __m128i group =
      _mm_hadd_epi16(_mm256_castsi256_si128(bsums), _mm256_extracti128_si256(bsums, 1));
  const __m128i prod = _mm_madd_epi16(mins, group);
  return _mm_fmadd_ps(_mm_set1_ps(-x.d * dmin), _mm_cvtepi32_ps(prod), acc);
}

// The 128 quants of half h of a Q6_K block as unsigned bytes (q + 32, 0-63), 32 per part:
// part p's low nibble from ql (bytes 0-31 or 32-63, low or high half), top two bits from
// bits 2p of the half's 32 qh bytes.
inline void Q6HalfQuants(const uint8_t* blk, int h, __m256i q[4]) {
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  const __m256i two = _mm256_set1_epi8(3);
  const __m256i l0 = Load(blk + 64 * h);
  const __m256i l1 = Load(blk + 64 * h + 32);
  const __m256i top = Load(blk + 128 + 32 * h);
  q[0] = _mm256_and_si256(l0, nibble);
  q[1] = _mm256_and_si256(l1, nibble);
  q[2] = _mm256_and_si256(_mm256_srli_epi16(l0, 4), nibble);
  q[3] = _mm256_and_si256(_mm256_srli_epi16(l1, 4), nibble);
  for (int part = 0; part < 4; ++part) {
    const __m256i bits = _mm256_and_si256(_mm256_srli_epi16(top, 2 * part), two);
    q[part] = _mm256_or_si256(q[part], _mm256_slli_epi16(bits, 4));
  }
}

// f(std::integral_constant<int, R>{}) for R = rows (1-4), so a kernel templated on its
// row count is called with a run-time one.
template <typename F>
inline void WithRows(int rows, F&& f) {
  switch (rows) {
    case 1:
      return f(std::integral_constant<int, 1>{});
    case 2:
      return f(std::integral_constant<int, 2>{});
    case 3:
      return f(std::integral_constant<int, 3>{});
    default:
      return f(std::integral_constant<int, 4>{});
  }
}

// One K-quant weight row times `rows` Q8K rows through Kernel<R, type>::Run, the file's
// kernels for R rows of x and one weight type.
template <template <int, DType> class Kernel>
inline void KQuantRows(DType dtype, const uint8_t* row, const Q8KBlock* const* x, int rows,
                       int64_t blocks, float* out) {
  WithRows(rows, [&](auto r) {
    constexpr int R = decltype(r)::value;
    switch (dtype) {
      case DType::kQ4_K:
        return Kernel<R, DType::kQ4_K>::Run(row, x, blocks, out);
      case DType::kQ5_K:
        return Kernel<R, DType::kQ5_K>::Run(row, x, blocks, out);
      case DType::kQ6_K:
        return Kernel<R, DType::kQ6_K>::Run(row, x, blocks, out);
      default:
        for (int i = 0; i < R; ++i) out[i] = 0;
    }
  });
}

}  // namespace
}  // namespace baton::cpu::internal
