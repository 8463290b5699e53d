// AVX2 dequantization of the block types that dominate llama-quantize's mixes (Q4_K, Q5_K,
// Q6_K and Q5_0), eight values to a vector. GCC's vectorization of the plain loops of
// quant_blocks_inl.h gave 4-wide code around the stores (perf: 28 % of a 135M Q4_K_M
// decode step in the dequantization, 3 % in the multiply that reads it). Each value is
// the reference's own sequence of IEEE operations (an exact int-to-float conversion, then
// the same multiply and subtract, never fused), so the results are identical to
// DequantizeBlocks (kernels_matmul_test compares them bit for bit on every ISA path).
// Included only by quant_dequant_<isa>.cc, each compiled with its own flags.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/quant_blocks_inl.h"

namespace baton::cpu::internal {
namespace {  // NOLINT(google-build-namespaces): one copy per including file is the point.

// Eight bytes from p, each widened to a 32-bit lane.
inline __m256i Bytes8(const uint8_t* p) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}

// y[0..8) = d * float(q) - m, the multiply and the subtract rounded separately.
inline void StoreScaledMinus(float* y, __m256i q, __m256 d, __m256 m) {
  _mm256_storeu_ps(y, _mm256_sub_ps(_mm256_mul_ps(d, _mm256_cvtepi32_ps(q)), m));
}

// Scale and minimum of sub-blocks `is` and `is + 1` of a Q4_K or Q5_K block, broadcast.
inline void ScalesMinsK4(float d, float dmin, const uint8_t* scales, int is, __m256* d1, __m256* m1,
                         __m256* d2, __m256* m2) {
  int sc = 0, mn = 0;
  ScaleMinK4(is, scales, &sc, &mn);
  *d1 = _mm256_set1_ps(d * static_cast<float>(sc));
  *m1 = _mm256_set1_ps(dmin * static_cast<float>(mn));
  ScaleMinK4(is + 1, scales, &sc, &mn);
  *d2 = _mm256_set1_ps(d * static_cast<float>(sc));
  *m2 = _mm256_set1_ps(dmin * static_cast<float>(mn));
}

inline void DequantQ4_KSimd(const uint8_t* __restrict b, float* __restrict y) {
  const float d = HalfAt(b), dmin = HalfAt(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* q = b + 16;
  const __m256i nibble = _mm256_set1_epi32(0x0f);
  for (int is = 0; is < 8; is += 2, q += 32, y += 64) {
    __m256 d1, m1, d2, m2;
    ScalesMinsK4(d, dmin, scales, is, &d1, &m1, &d2, &m2);
    for (int l = 0; l < 32; l += 8) {
      const __m256i v = Bytes8(q + l);
      StoreScaledMinus(y + l, _mm256_and_si256(v, nibble), d1, m1);
      StoreScaledMinus(y + 32 + l, _mm256_srli_epi32(v, 4), d2, m2);
    }
  }
}

inline void DequantQ5_KSimd(const uint8_t* __restrict b, float* __restrict y) {
  const float d = HalfAt(b), dmin = HalfAt(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* ql = b + 48;
  const __m256i nibble = _mm256_set1_epi32(0x0f);
  const __m256i sixteen = _mm256_set1_epi32(16);
  int u1 = 1, u2 = 2;
  for (int is = 0; is < 8; is += 2, ql += 32, y += 64, u1 <<= 2, u2 <<= 2) {
    __m256 d1, m1, d2, m2;
    ScalesMinsK4(d, dmin, scales, is, &d1, &m1, &d2, &m2);
    const __m256i bit1 = _mm256_set1_epi32(u1);
    const __m256i bit2 = _mm256_set1_epi32(u2);
    for (int l = 0; l < 32; l += 8) {
      const __m256i v = Bytes8(ql + l);
      const __m256i h = Bytes8(qh + l);
      // 16 where the high bit is set: (h & bit) == bit gives all ones, masked to 16.
      const __m256i hi1 =
          _mm256_and_si256(_mm256_cmpeq_epi32(_mm256_and_si256(h, bit1), bit1), sixteen);
      const __m256i hi2 =
          _mm256_and_si256(_mm256_cmpeq_epi32(_mm256_and_si256(h, bit2), bit2), sixteen);
      StoreScaledMinus(y + l, _mm256_add_epi32(_mm256_and_si256(v, nibble), hi1), d1, m1);
      StoreScaledMinus(y + 32 + l, _mm256_add_epi32(_mm256_srli_epi32(v, 4), hi2), d2, m2);
    }
  }
}

inline void DequantQ6_KSimd(const uint8_t* __restrict b, float* __restrict y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = HalfAt(b + 208);
  const __m256i nibble = _mm256_set1_epi32(0x0f);
  const __m256i two_bits = _mm256_set1_epi32(3);
  const __m256i bias = _mm256_set1_epi32(32);
  // As DequantQ6_K: element 32 * part + l of each half takes its low nibble from ql and
  // its top two bits from qh[l], bits 2 * part.
  for (int half = 0; half < 2; ++half, ql += 64, qh += 32, sc += 8, y += 128) {
    for (int part = 0; part < 4; ++part) {
      const uint8_t* low = ql + (part & 1) * 32;
      const __m128i low_shift = _mm_cvtsi32_si128((part >> 1) * 4);
      const __m128i high_shift = _mm_cvtsi32_si128(2 * part);
      for (int l = 0; l < 32; l += 8) {
        const __m256 ds = _mm256_set1_ps(d * static_cast<float>(sc[l / 16 + 2 * part]));
        const __m256i lo = _mm256_and_si256(_mm256_srl_epi32(Bytes8(low + l), low_shift), nibble);
        const __m256i hi = _mm256_slli_epi32(
            _mm256_and_si256(_mm256_srl_epi32(Bytes8(qh + l), high_shift), two_bits), 4);
        const __m256i q = _mm256_sub_epi32(_mm256_or_si256(lo, hi), bias);
        _mm256_storeu_ps(y + 32 * part + l, _mm256_mul_ps(ds, _mm256_cvtepi32_ps(q)));
      }
    }
  }
}

inline void DequantQ5_0Simd(const uint8_t* __restrict b, float* __restrict y) {
  const __m256 d = _mm256_set1_ps(HalfAt(b));
  const __m256i qh = _mm256_set1_epi32(static_cast<int>(U32At(b + 2)));
  const uint8_t* qs = b + 6;
  const __m256i nibble = _mm256_set1_epi32(0x0f);
  const __m256i bit4 = _mm256_set1_epi32(0x10);
  const __m256i bias = _mm256_set1_epi32(16);
  const __m256i twelve = _mm256_set1_epi32(12);
  for (int j = 0; j < 16; j += 8) {
    const __m256i idx = _mm256_setr_epi32(j, j + 1, j + 2, j + 3, j + 4, j + 5, j + 6, j + 7);
    // Bit j of qh is the fifth bit of value j, bit j + 16 that of value j + 16.
    const __m256i hi0 = _mm256_and_si256(_mm256_slli_epi32(_mm256_srlv_epi32(qh, idx), 4), bit4);
    const __m256i hi1 =
        _mm256_and_si256(_mm256_srlv_epi32(qh, _mm256_add_epi32(idx, twelve)), bit4);
    const __m256i v = Bytes8(qs + j);
    const __m256i q0 = _mm256_sub_epi32(_mm256_or_si256(_mm256_and_si256(v, nibble), hi0), bias);
    const __m256i q1 = _mm256_sub_epi32(_mm256_or_si256(_mm256_srli_epi32(v, 4), hi1), bias);
    // float(q) * d, the reference's order.
    _mm256_storeu_ps(y + j, _mm256_mul_ps(_mm256_cvtepi32_ps(q0), d));
    _mm256_storeu_ps(y + 16 + j, _mm256_mul_ps(_mm256_cvtepi32_ps(q1), d));
  }
}

template <void (*kBlock)(const uint8_t*, float*), int kElems, int kBytes>
void DequantEachSimd(const uint8_t* src, int64_t n, float* y) {
  for (int64_t i = 0; i < n / kElems; ++i) kBlock(src + i * kBytes, y + i * kElems);
}

// n values (whole blocks) of `dtype` to f32: the types above here, the rest as the
// reference (GCC vectorizes those loops at -O3).
inline void DequantValuesSimd(DType dtype, const uint8_t* src, int64_t n, float* y) {
  switch (dtype) {
    case DType::kQ4_K:
      return DequantEachSimd<DequantQ4_KSimd, 256, LayoutOf(DType::kQ4_K).bytes>(src, n, y);
    case DType::kQ5_K:
      return DequantEachSimd<DequantQ5_KSimd, 256, LayoutOf(DType::kQ5_K).bytes>(src, n, y);
    case DType::kQ6_K:
      return DequantEachSimd<DequantQ6_KSimd, 256, LayoutOf(DType::kQ6_K).bytes>(src, n, y);
    case DType::kQ5_0:
      return DequantEachSimd<DequantQ5_0Simd, 32, LayoutOf(DType::kQ5_0).bytes>(src, n, y);
    default:
      return DequantValues(dtype, src, n, y);
  }
}

}  // namespace
}  // namespace baton::cpu::internal
