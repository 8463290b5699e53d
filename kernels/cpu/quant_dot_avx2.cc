// Weight rows of the types with an int8 product times their activation blocks with AVX2
// (quant_dot.h). K-quants: unsigned weight quants times signed activations by vpmaddubsw
// (pairs into 16 bits; 63 * 127 * 2 < 2^15), times the group's scale by vpmaddwd into 8
// lanes of 32 bits; four blocks' lanes are summed together to each block's integer total,
// which goes to f32 in AddBlockK's order (quant_dot_inl.h). The 32-value types: the same
// products per block of 32, eight blocks' totals summed together and multiplied in
// FinishLanes8's order. Up to 4 rows of x share each decoded weight block.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/quant_dot_simd_inl.h"

namespace baton::cpu::internal {
namespace {

// Byte pairs (2w, 2w + 1) of each 128-bit half, repeated: word w broadcast.
__m256i WordBroadcast(int w) {
  const auto lo = static_cast<char>(2 * w), hi = static_cast<char>(2 * w + 1);
  return _mm256_setr_epi8(lo, hi, lo, hi, lo, hi, lo, hi, lo, hi, lo, hi, lo, hi, lo, hi, lo, hi,
                          lo, hi, lo, hi, lo, hi, lo, hi, lo, hi, lo, hi, lo, hi);
}

template <int R, bool kFive>
void RowsQ45K(const uint8_t* row, const Q8KBlock* const* x, int64_t blocks, float* out) {
  const size_t bytes = kFive ? 176 : 144;
  auto block = [&](int64_t b, float* d, float* dmin, __m256i* sums, __m128i* mins_sums) {
    const uint8_t* blk = row + b * bytes;
    *d = Half(blk);
    *dmin = Half(blk + 2);
    const __m256i scales_mins = ScalesAndMins(blk + 4);
    const __m128i mins = _mm256_extracti128_si256(scales_mins, 1);
    const __m128i sc128 = _mm256_castsi256_si128(scales_mins);
    const __m256i scales = _mm256_setr_m128i(sc128, sc128);
    const uint8_t* qs = blk + (kFive ? 48 : 16);
    const __m256i high = kFive ? Load(blk + 16) : _mm256_setzero_si256();
    for (int r = 0; r < R; ++r) sums[r] = _mm256_setzero_si256();
    for (int p = 0; p < 4; ++p) {
      __m256i lo, hi;
      PairQuants<kFive>(qs, high, p, &lo, &hi);
      const __m256i scale_lo = _mm256_shuffle_epi8(scales, WordBroadcast(2 * p));
      const __m256i scale_hi = _mm256_shuffle_epi8(scales, WordBroadcast(2 * p + 1));
      for (int r = 0; r < R; ++r) {
        const __m256i a = _mm256_maddubs_epi16(lo, Load(x[r][b].qs + 64 * p));
        const __m256i c = _mm256_maddubs_epi16(hi, Load(x[r][b].qs + 64 * p + 32));
        sums[r] = _mm256_add_epi32(sums[r], _mm256_add_epi32(_mm256_madd_epi16(scale_lo, a),
                                                             _mm256_madd_epi16(scale_hi, c)));
      }
    }
    for (int r = 0; r < R; ++r) mins_sums[r] = MinsLanes(mins, x[r][b]);
  };
  RowsByFour<R>(x, blocks, block, out);
}

// Q6_K: the quants unsigned (q + 32 in [0, 63]) in vpmaddubsw; 32 * scale * (the group's
// Q8K sum) comes off per block from the sums of 16 the Q8K block keeps.
template <int R>
void RowsQ6K(const uint8_t* row, const Q8KBlock* const* x, int64_t blocks, float* out) {
  auto block = [&](int64_t b, float* d, float* dmin, __m256i* sums, __m128i* mins_sums) {
    const uint8_t* blk = row + b * 210;
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192));
    *d = Half(blk + 208);
    *dmin = 0;
    const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
    for (int r = 0; r < R; ++r) {
      // -32 * sum over groups of scale * (sum of the group's 16 activations).
      sums[r] = _mm256_slli_epi32(_mm256_madd_epi16(sc16, Load(x[r][b].bsums)), 5);
      sums[r] = _mm256_sub_epi32(_mm256_setzero_si256(), sums[r]);
      mins_sums[r] = _mm_setzero_si128();
    }
    for (int half = 0; half < 2; ++half) {
      __m256i q[4];
      Q6HalfQuants(blk, half, q);
      __m256i scale[4];
      for (int part = 0; part < 4; ++part) {
        // Lanes 0-7 are elements l < 16 (group 8 half + 2 part), lanes 8-15 the next group.
        const int g = 8 * half + 2 * part;
        scale[part] = _mm256_setr_m128i(
            _mm_set1_epi16(static_cast<int16_t>(static_cast<int8_t>(blk[192 + g]))),
            _mm_set1_epi16(static_cast<int16_t>(static_cast<int8_t>(blk[193 + g]))));
      }
      for (int r = 0; r < R; ++r) {
        const int8_t* q8 = x[r][b].qs + 128 * half;
        for (int part = 0; part < 4; ++part) {
          const __m256i prod = _mm256_maddubs_epi16(q[part], Load(q8 + 32 * part));
          sums[r] = _mm256_add_epi32(sums[r], _mm256_madd_epi16(scale[part], prod));
        }
      }
    }
  };
  RowsByFour<R>(x, blocks, block, out);
}

// Lanes t < n all ones, the rest zero (16 or 32 bits each).
[[gnu::always_inline]] inline __m128i First16(int n) {
  return _mm_cmpgt_epi16(_mm_set1_epi16(static_cast<int16_t>(n)),
                         _mm_setr_epi16(0, 1, 2, 3, 4, 5, 6, 7));
}

[[gnu::always_inline]] inline __m256 First32(int n) {
  return _mm256_castsi256_ps(
      _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
}

// The f16 at byte `at` of blocks 0..n-1 (kBytes apart), zeros past them, as f32 lanes.
// Element by element from the blocks (lanes past n read block 0, then masked): a gather is
// slow on AMD, and scalars stored to the stack and read back as one vector would stall on
// store forwarding.
template <int kBytes>
[[gnu::always_inline]] inline __m256 BlockHalves(const uint8_t* first, int at, int n) {
  auto half = [&](int t) {
    int16_t v;
    std::memcpy(&v, first + (t < n ? t : 0) * kBytes + at, 2);
    return v;
  };
  __m128i v =
      _mm_setr_epi16(half(0), half(1), half(2), half(3), half(4), half(5), half(6), half(7));
  if (n < 8) v = _mm_and_si128(v, First16(n));
  return _mm256_cvtph_ps(v);
}

// x[0..n-1].d (or .s), zeros past them; as BlockHalves.
template <bool kS>
[[gnu::always_inline]] inline __m256 EightScales(const Q8Block32* x, int n) {
  auto at = [&](int t) { return kS ? x[t < n ? t : 0].s : x[t < n ? t : 0].d; };
  const __m256 v = _mm256_setr_ps(at(0), at(1), at(2), at(3), at(4), at(5), at(6), at(7));
  return n < 8 ? _mm256_and_ps(v, First32(n)) : v;
}

// 8 vectors of 8 int32 lanes to one vector of their 8 sums, in order (exact).
[[gnu::always_inline]] inline __m256i Sums8x8(const __m256i v[8]) {
  // Per 128-bit half: the sums of lanes 0-3 (low half) or 4-7 (high half) of v[0..3].
  const __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
  const __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20),
                          _mm256_permute2x128_si256(a, b, 0x31));
}

// Eight blocks at a time: each block's integer sum in 8 lanes, the eight blocks' sums
// into one register, and one multiply-add per row for the eight (FinishLanes8's order).
template <DType kType, int R>
void RowsLegacy(const uint8_t* row, const Q8Block32* const* x, int64_t blocks, float* out) {
  constexpr int kBytes = LayoutOf(kType).bytes;
  constexpr int kOffset = kType == DType::kQ4_0 ? 8 : kType == DType::kQ5_0 ? 16 : 0;
  constexpr bool kMin = kType == DType::kQ4_1 || kType == DType::kQ5_1;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t i0 = 0; i0 < blocks; i0 += 8) {
    const int n = static_cast<int>(std::min<int64_t>(8, blocks - i0));
    __m256i s[R][8];
#pragma GCC unroll 8
    for (int t = 0; t < 8; ++t) {
      if (t >= n) {
        for (int r = 0; r < R; ++r) s[r][t] = _mm256_setzero_si256();
        continue;
      }
      const uint8_t* b = row + (i0 + t) * kBytes;
      const __m256i q = LegacyBytes<kType>(b);
      // vpmaddubsw takes unsigned x signed: Q8_0's signed weights go in as |w| with their
      // signs moved onto the activations.
      const __m256i uq = kType == DType::kQ8_0 ? _mm256_sign_epi8(q, q) : q;
      for (int r = 0; r < R; ++r) {
        const Q8Block32& a = x[r][i0 + t];
        __m256i y = Load(a.qs);
        if constexpr (kType == DType::kQ8_0) y = _mm256_sign_epi8(y, q);
        s[r][t] = _mm256_madd_epi16(_mm256_maddubs_epi16(uq, y), ones);
        if constexpr (kOffset != 0) {
          s[r][t] =
              _mm256_sub_epi32(s[r][t], _mm256_setr_epi32(kOffset * a.sum, 0, 0, 0, 0, 0, 0, 0));
        }
      }
    }
    const __m256 dw = BlockHalves<kBytes>(row + i0 * kBytes, 0, n);
    for (int r = 0; r < R; ++r) {
      const __m256 sums = _mm256_cvtepi32_ps(Sums8x8(s[r]));
      acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(dw, EightScales<false>(x[r] + i0, n)), sums, acc[r]);
      if constexpr (kMin) {
        acc[r] = _mm256_fmadd_ps(BlockHalves<kBytes>(row + i0 * kBytes, 2, n),
                                 EightScales<true>(x[r] + i0, n), acc[r]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, acc[r]);
    out[r] = FinishLanes8(lanes);
  }
}

template <int R>
void LegacyRows(DType dtype, const uint8_t* row, const Q8Block32* const* x, int64_t blocks,
                float* out) {
  switch (dtype) {
    case DType::kQ8_0:
      return RowsLegacy<DType::kQ8_0, R>(row, x, blocks, out);
    case DType::kQ4_0:
      return RowsLegacy<DType::kQ4_0, R>(row, x, blocks, out);
    case DType::kQ4_1:
      return RowsLegacy<DType::kQ4_1, R>(row, x, blocks, out);
    case DType::kQ5_0:
      return RowsLegacy<DType::kQ5_0, R>(row, x, blocks, out);
    case DType::kQ5_1:
      return RowsLegacy<DType::kQ5_1, R>(row, x, blocks, out);
    default:
      for (int r = 0; r < R; ++r) out[r] = 0;
  }
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

void DotRowsLegacyAvx2(DType dtype, const uint8_t* row, const Q8Block32* const* x, int rows,
                       int64_t blocks, float* out) {
  WithRows(rows, [&](auto r) { LegacyRows<decltype(r)::value>(dtype, row, x, blocks, out); });
}

void DotRowsAvx2(DType dtype, const uint8_t* row, const Q8KBlock* const* x, int rows,
                 int64_t blocks, float* out) {
  KQuantRows<KQuantKernel>(dtype, row, x, rows, blocks, out);
}

}  // namespace baton::cpu::internal
