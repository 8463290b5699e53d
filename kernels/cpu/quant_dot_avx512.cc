// K-quant weight rows times Q8K rows with AVX-512 (F/BW): quant_dot_avx2.cc's method on
// 64 values per instruction. The low and high nibbles of 32 quant bytes (two groups of 32)
// fill one register, vpmaddubsw and vpmaddwd take them with each group's scale in its
// half, and per block the 16 lanes are summed to the block's integer total, which goes to
// f32 in AddBlockK's order (quant_dot_inl.h). Up to 4 rows of x share each decoded block.
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

template <int R, bool kFive>
void RowsQ45K(const uint8_t* row, const Q8KBlock* const* x, int64_t blocks, float* out) {
  const size_t bytes = kFive ? 176 : 144;
  auto block = [&](int64_t b, float* d, float* dmin, __m256i* sums, __m128i* mins_sums) {
    const uint8_t* blk = row + b * bytes;
    *d = Half(blk);
    *dmin = Half(blk + 2);
    const __m256i scales_mins = ScalesAndMins(blk + 4);
    const __m128i mins = _mm256_extracti128_si256(scales_mins, 1);
    const __m512i table = _mm512_zextsi256_si512(scales_mins);
    const uint8_t* qs = blk + (kFive ? 48 : 16);
    const __m256i high = kFive ? Load(blk + 16) : _mm256_setzero_si256();
    __m512i sumi[R];
    for (int r = 0; r < R; ++r) sumi[r] = _mm512_setzero_si512();
    for (int p = 0; p < 4; ++p) {
      __m256i lo, hi;
      PairQuants<kFive>(qs, high, p, &lo, &hi);
      const __m512i q = Join(lo, hi);
      const __m512i scale = _mm512_permutexvar_epi16(TwoWords(2 * p, 2 * p + 1), table);
      for (int r = 0; r < R; ++r) {
        const __m512i prod = _mm512_maddubs_epi16(q, Load512(x[r][b].qs + 64 * p));
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

template <int R>
void RowsQ6K(const uint8_t* row, const Q8KBlock* const* x, int64_t blocks, float* out) {
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
    for (int half = 0; half < 2; ++half) {
      __m256i q[4];
      Q6HalfQuants(blk, half, q);
      // Parts 0-1 and 2-3 side by side: groups 8 half + 0..3 and 8 half + 4..7.
      const __m512i q01 = Join(q[0], q[1]), q23 = Join(q[2], q[3]);
      const __m512i s01 = _mm512_permutexvar_epi16(FourWords(8 * half), table);
      const __m512i s23 = _mm512_permutexvar_epi16(FourWords(8 * half + 4), table);
      for (int r = 0; r < R; ++r) {
        const int8_t* q8 = x[r][b].qs + 128 * half;
        const __m512i a = _mm512_maddubs_epi16(q01, Load512(q8));
        const __m512i c = _mm512_maddubs_epi16(q23, Load512(q8 + 64));
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

}  // namespace baton::cpu::internal
