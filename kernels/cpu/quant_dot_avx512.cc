// Weight rows of the types with an int8 product times their activation blocks with
// AVX-512 (F/BW/VL): quant_dot_avx2.cc's method on 64 values per instruction. A Q4_K
// block's 128 quant bytes are read 64 at a time, their low and high nibbles regrouped by
// 128-bit lanes into registers of two groups; Q6_K's half blocks the same way (64 ql bytes,
// top bits from 32 qh bytes); vpmaddubsw and vpmaddwd take them with each group's scale,
// and per block the 16 lanes are summed to the block's integer total, which goes to f32 in
// AddBlockK's order (quant_dot_inl.h). The 32-value types run quant_dot_simd_inl.h's
// RowsLegacy, two blocks per register. Up to 4 rows of x share each decoded block.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/quant_dot_simd_inl.h"

namespace baton::cpu::internal {
namespace {

__m512i Load512(const void* p) { return _mm512_loadu_si512(p); }

__m512i Join(__m256i lo, __m256i hi) {
  return _mm512_inserti64x4(_mm512_zextsi256_si512(lo), hi, 1);
}

// 16-bit lanes: word a in lanes 0-15, word b in lanes 16-31 (of a 16-word table).
__m512i TwoWords(int a, int b) {
  return _mm512_inserti64x4(_mm512_set1_epi16(static_cast<int16_t>(a)),
                            _mm256_set1_epi16(static_cast<int16_t>(b)), 1);
}

// Lanes 8g..8g+7 hold word first + g, g = 0..3.
__m512i FourWords(int first) {
  alignas(64) int16_t idx[32];
  for (int i = 0; i < 32; ++i) idx[i] = static_cast<int16_t>(first + i / 8);
  return _mm512_load_si512(idx);
}

// A block's 16 lanes of integer sums folded to 8 (the rest goes by Sums4x8).
__m256i Fold(__m512i v) {
  return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

// Two 128-bit lanes of a and then the same two of b: [a.lo256, b.lo256] (kLow) or
// [a.hi256, b.hi256].
constexpr int kLowHalves = 0x44, kHighHalves = 0xee;

// The 256 quants of a Q4_K block, 0-15, as four registers of groups (0, 1), (2, 3),
// (4, 5), (6, 7): each 64 bytes of qs hold two pairs, low nibbles the first group of each.
inline void Q4Quants(const uint8_t* qs, __m512i q[4]) {
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  for (int i = 0; i < 2; ++i) {
    const __m512i bits = Load512(qs + 64 * i);
    const __m512i lo = _mm512_and_si512(bits, nibble);
    const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(bits, 4), nibble);
    q[2 * i] = _mm512_shuffle_i64x2(lo, hi, kLowHalves);
    q[2 * i + 1] = _mm512_shuffle_i64x2(lo, hi, kHighHalves);
  }
}

// Q5_K's quants as Q4Quants' registers: the fifth bit of pair p's groups is bits 2p and
// 2p + 1 of the 32 qh bytes in `high`.
inline void Q5Quants(const uint8_t* qs, __m256i high, __m512i q[4]) {
  for (int p = 0; p < 4; ++p) {
    __m256i lo, hi;
    PairQuants<true>(qs, high, p, &lo, &hi);
    q[p] = Join(lo, hi);
  }
}

template <int R, bool kFive>
void RowsQ45K(const uint8_t* row, const Q8KBlock* const* x, int64_t blocks, float* out) {
  const size_t bytes = kFive ? 176 : 144;
  // Pair p's scales: group 2p's in lanes 0-15, group 2p + 1's in lanes 16-31.
  const __m512i pair_scale[4] = {TwoWords(0, 1), TwoWords(2, 3), TwoWords(4, 5), TwoWords(6, 7)};
  auto block = [&](int64_t b, float* d, float* dmin, __m256i* sums, __m128i* mins_sums) {
    const uint8_t* blk = row + b * bytes;
    *d = Half(blk);
    *dmin = Half(blk + 2);
    const __m256i scales_mins = ScalesAndMins(blk + 4);
    const __m128i mins = _mm256_extracti128_si256(scales_mins, 1);
    const __m512i table = _mm512_zextsi256_si512(scales_mins);
    __m512i q[4];
    if constexpr (kFive) {
      Q5Quants(blk + 48, Load(blk + 16), q);
    } else {
      Q4Quants(blk + 16, q);
    }
    __m512i sumi[R];
    for (int r = 0; r < R; ++r) sumi[r] = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      const __m512i scale = _mm512_permutexvar_epi16(pair_scale[p], table);
      for (int r = 0; r < R; ++r) {
        const __m512i prod = _mm512_maddubs_epi16(q[p], Load512(x[r][b].qs + 64 * p));
        sumi[r] = _mm512_add_epi32(sumi[r], _mm512_madd_epi16(scale, prod));
      }
    }
    for (int r = 0; r < R; ++r) {
      sums[r] = Fold(sumi[r]);
      mins_sums[r] = MinsLanes(mins, x[r][b]);
    }
  };
  RowsByFour<R>(x, blocks, block, out);
}

// The 128 quants of half h of a Q6_K block as unsigned bytes (q + 32, 0-63) in two
// registers, values 0-63 and 64-127 of the half: the low nibbles of its 64 ql bytes are
// values 0-63, the high ones 64-127; the top two bits of value 32 part + i are bits 2 part
// of qh byte i.
inline void Q6Quants(const uint8_t* blk, int h, __m512i q[2]) {
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  const __m512i two = _mm512_set1_epi8(0x30);
  const __m512i low = Load512(blk + 64 * h);
  const __m256i qh = Load(blk + 128 + 32 * h);
  // Parts 0, 1 at bits 4-5 of lanes 0-31 and 32-63 (shifted left 4 and 2), parts 2, 3
  // (shifted right 0 and 2).
  const __m512i top01 = Join(_mm256_slli_epi16(qh, 4), _mm256_slli_epi16(qh, 2));
  const __m512i top23 = Join(qh, _mm256_srli_epi16(qh, 2));
  q[0] = _mm512_ternarylogic_epi32(_mm512_and_si512(low, nibble), top01, two, 0xf8);
  q[1] = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(low, 4), nibble), top23, two,
                                   0xf8);
}

template <int R>
void RowsQ6K(const uint8_t* row, const Q8KBlock* const* x, int64_t blocks, float* out) {
  // Scales of groups 4i..4i+3, 16 lanes each: q[0] of half h takes groups 8h..8h+3.
  const __m512i four_scales[4] = {FourWords(0), FourWords(4), FourWords(8), FourWords(12)};
  auto block = [&](int64_t b, float* d, float* dmin, __m256i* sums, __m128i* mins_sums) {
    const uint8_t* blk = row + b * 210;
    *d = Half(blk + 208);
    *dmin = 0;
    const __m256i sc16 =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192)));
    const __m512i table = _mm512_zextsi256_si512(sc16);
    __m512i sumi[R];
    for (int r = 0; r < R; ++r) {
      // -32 * sum over groups of scale * (sum of the group's 16 activations).
      const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(sc16, Load(x[r][b].bsums)), 5);
      sumi[r] = _mm512_zextsi256_si512(_mm256_sub_epi32(_mm256_setzero_si256(), offset));
    }
#pragma GCC unroll 2
    for (int half = 0; half < 2; ++half) {
      __m512i q[2];
      Q6Quants(blk, half, q);
      const __m512i s01 = _mm512_permutexvar_epi16(four_scales[2 * half], table);
      const __m512i s23 = _mm512_permutexvar_epi16(four_scales[2 * half + 1], table);
      for (int r = 0; r < R; ++r) {
        const int8_t* q8 = x[r][b].qs + 128 * half;
        const __m512i a = _mm512_maddubs_epi16(q[0], Load512(q8));
        const __m512i c = _mm512_maddubs_epi16(q[1], Load512(q8 + 64));
        sumi[r] = _mm512_add_epi32(
            sumi[r], _mm512_add_epi32(_mm512_madd_epi16(s01, a), _mm512_madd_epi16(s23, c)));
      }
    }
    for (int r = 0; r < R; ++r) {
      sums[r] = Fold(sumi[r]);
      mins_sums[r] = _mm_setzero_si128();
    }
  };
  RowsByFour<R>(x, blocks, block, out);
}

template <int R, DType kType>
struct KQuantKernel {
  static void Run(const uint8_t* row, const Q8KBlock* const* x, int64_t blocks, float* out) {
    if constexpr (kType == DType::kQ6_K) {
      RowsQ6K<R>(row, x, blocks, out);
    } else {
      RowsQ45K<R, kType == DType::kQ5_K>(row, x, blocks, out);
    }
  }
};

}  // namespace

void DotRowsAvx512(DType dtype, const uint8_t* row, const Q8KBlock* const* x, int rows,
                   int64_t blocks, float* out) {
  KQuantRows<KQuantKernel>(dtype, row, x, rows, blocks, out);
}

void DotRowsLegacyAvx512(DType dtype, const uint8_t* row, const Q8Block32* const* x, int rows,
                         int64_t blocks, float* out) {
  WithRows(rows, [&](auto r) { LegacyRows<decltype(r)::value>(dtype, row, 0, x, blocks, out); });
}

void DotRowPairLegacyAvx512(DType dtype, const uint8_t* row, size_t row_bytes, const Q8Block32* x,
                            int64_t blocks, float out[2]) {
  LegacyRows<1, 2>(dtype, row, row_bytes, &x, blocks, out);
}

}  // namespace baton::cpu::internal
