// Weight rows of the types with an int8 product times their activation blocks with AVX2
// (quant_dot.h). K-quants: unsigned weight quants times signed activations by vpmaddubsw
// (pairs into 16 bits; 63 * 127 * 2 < 2^15), times the group's scale by vpmaddwd into 8
// lanes of 32 bits; four blocks' lanes are summed together to each block's integer total,
// which goes to f32 in AddBlockK's order (quant_dot_inl.h). The 32-value types
// (quant_dot_simd_inl.h's RowsLegacy): the same products per block of 32, eight blocks'
// totals summed together and multiplied in FinishLanes8's order. Up to 4 rows of x share
// each decoded weight block.
// GCC's reassociation and temporary expression replacement turn the chains of 16- and
// 32-bit adds below into trees that hold every product at once: 16 registers do not, and
// the spills cost up to a third of the speed (quant_tile_avx2.cc's RowsK<2, Q4_K>: 53
// stack accesses -> 10; here Q4_K decode 7.15 -> 6.7 ns per block).
// Before every include, so the helpers carry the same options and still inline.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-tree-reassoc", "no-tree-ter")
#endif
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

// Word w broadcast in the low 128-bit half, word w + 1 in the high half.
__m256i WordPairBroadcast(int w) {
  const auto a = static_cast<char>(2 * w), b = static_cast<char>(2 * w + 1);
  const auto c = static_cast<char>(2 * w + 2), d = static_cast<char>(2 * w + 3);
  return _mm256_setr_epi8(a, b, a, b, a, b, a, b, a, b, a, b, a, b, a, b, c, d, c, d, c, d, c, d, c,
                          d, c, d, c, d, c, d);
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
#pragma GCC unroll 4
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
#pragma GCC unroll 2
    for (int half = 0; half < 2; ++half) {
      __m256i q[4];
      Q6HalfQuants(blk, half, q);
      // The half's 8 scales in both 128-bit lanes; part p takes groups 8 half + 2p (lanes
      // 0-7: its elements l < 16) and 8 half + 2p + 1 (lanes 8-15).
      const __m256i table = half == 0 ? _mm256_permute2x128_si256(sc16, sc16, 0x00)
                                      : _mm256_permute2x128_si256(sc16, sc16, 0x11);
      __m256i scale[4];
#pragma GCC unroll 4
      for (int part = 0; part < 4; ++part) {
        scale[part] = _mm256_shuffle_epi8(table, WordPairBroadcast(2 * part));
      }
      for (int r = 0; r < R; ++r) {
        const int8_t* q8 = x[r][b].qs + 128 * half;
#pragma GCC unroll 4
        for (int part = 0; part < 4; ++part) {
          const __m256i prod = _mm256_maddubs_epi16(q[part], Load(q8 + 32 * part));
          sums[r] = _mm256_add_epi32(sums[r], _mm256_madd_epi16(scale[part], prod));
        }
      }
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

void DotRowsLegacyAvx2(DType dtype, const uint8_t* row, const Q8Block32* const* x, int rows,
                       int64_t blocks, float* out) {
  WithRows(rows, [&](auto r) { LegacyRows<decltype(r)::value>(dtype, row, 0, x, blocks, out); });
}

void DotRowPairLegacyAvx2(DType dtype, const uint8_t* row, size_t row_bytes, const Q8Block32* x,
                          int64_t blocks, float out[2]) {
  LegacyRows<1, 2>(dtype, row, row_bytes, &x, blocks, out);
}

void DotRowsAvx2(DType dtype, const uint8_t* row, const Q8KBlock* const* x, int rows,
                 int64_t blocks, float* out) {
  KQuantRows<KQuantKernel>(dtype, row, x, rows, blocks, out);
}

}  // namespace baton::cpu::internal
