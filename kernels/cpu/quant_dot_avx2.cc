// K-quant weight rows times Q8K rows with AVX2 (quant_dot.h): unsigned weight quants times
// signed activations by vpmaddubsw (pairs into 16 bits; 63 * 127 * 2 < 2^15), times the
// group's scale by vpmaddwd into 8 lanes of 32 bits, and per block the lanes go to f32 and
// are added, times the block's scale, into 8 f32 lanes (llama.cpp's AVX2 order of work);
// the lanes are summed once per row. Up to 4 rows of x share each decoded weight block.
#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/quant_dot_simd_inl.h"

namespace baton::cpu::internal {
namespace {

float Sum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Byte pairs (2w, 2w + 1) of each 128-bit half, repeated: word w broadcast.
__m256i WordBroadcast(int w) {
  const auto lo = static_cast<char>(2 * w), hi = static_cast<char>(2 * w + 1);
  return _mm256_setr_epi8(lo, hi, lo, hi, lo, hi, lo, hi, lo, hi, lo, hi, lo, hi, lo, hi, lo, hi,
                          lo, hi, lo, hi, lo, hi, lo, hi, lo, hi, lo, hi, lo, hi);
}

template <int R, bool kFive>
void RowsQ45K(const uint8_t* row, const Q8KBlock* const* x, int64_t blocks, float* out) {
  const size_t bytes = kFive ? 176 : 144;
  __m256 acc[R];
  __m128 acc_min[R];
  for (int r = 0; r < R; ++r) {
    acc[r] = _mm256_setzero_ps();
    acc_min[r] = _mm_setzero_ps();
  }
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* blk = row + b * bytes;
    const float d = Half(blk), dmin = Half(blk + 2);
    const __m256i scales_mins = ScalesAndMins(blk + 4);
    const __m128i mins = _mm256_extracti128_si256(scales_mins, 1);
    const __m128i sc128 = _mm256_castsi256_si128(scales_mins);
    const __m256i scales = _mm256_setr_m128i(sc128, sc128);
    const uint8_t* qs = blk + (kFive ? 48 : 16);
    const __m256i high = kFive ? Load(blk + 16) : _mm256_setzero_si256();
    __m256i sumi[R];
    for (int r = 0; r < R; ++r) sumi[r] = _mm256_setzero_si256();
    for (int p = 0; p < 4; ++p) {
      __m256i lo, hi;
      PairQuants<kFive>(qs, high, p, &lo, &hi);
      const __m256i scale_lo = _mm256_shuffle_epi8(scales, WordBroadcast(2 * p));
      const __m256i scale_hi = _mm256_shuffle_epi8(scales, WordBroadcast(2 * p + 1));
      for (int r = 0; r < R; ++r) {
        const __m256i a = _mm256_maddubs_epi16(lo, Load(x[r][b].qs + 64 * p));
        const __m256i c = _mm256_maddubs_epi16(hi, Load(x[r][b].qs + 64 * p + 32));
        sumi[r] = _mm256_add_epi32(sumi[r], _mm256_add_epi32(_mm256_madd_epi16(scale_lo, a),
                                                             _mm256_madd_epi16(scale_hi, c)));
      }
    }
    for (int r = 0; r < R; ++r) {
      const Q8KBlock& qx = x[r][b];
      acc_min[r] = AddMins(acc_min[r], mins, qx, dmin);
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(qx.d * d), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) out[r] = Sum8(acc[r]) + Sum4(acc_min[r]);
}

// Q6_K: the quants unsigned (q + 32 in [0, 63]) in vpmaddubsw; 32 * scale * (the group's
// Q8K sum) comes off per block from the sums of 16 the Q8K block keeps.
template <int R>
void RowsQ6K(const uint8_t* row, const Q8KBlock* const* x, int64_t blocks, float* out) {
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* blk = row + b * 210;
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192));
    const float d = Half(blk + 208);
    const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
    __m256i sumi[R];
    for (int r = 0; r < R; ++r) {
      // -32 * sum over groups of scale * (sum of the group's 16 activations).
      sumi[r] = _mm256_slli_epi32(_mm256_madd_epi16(sc16, Load(x[r][b].bsums)), 5);
      sumi[r] = _mm256_sub_epi32(_mm256_setzero_si256(), sumi[r]);
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
          sumi[r] = _mm256_add_epi32(sumi[r], _mm256_madd_epi16(scale[part], prod));
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(x[r][b].d * d), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) out[r] = Sum8(acc[r]);
}

// 32 bits as 32 bytes: byte j is 0xff where bit j is set.
__m256i BitsToBytes(uint32_t bits) {
  // Byte j of the broadcast word that holds bit j, then every other bit of it forced on:
  // the byte is all ones exactly when bit j was.
  const __m256i which =
      _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303);
  const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)), which);
  const __m256i others = _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe);
  return _mm256_cmpeq_epi8(_mm256_or_si256(bytes, others), _mm256_set1_epi8(-1));
}

// A 32-value weight block's quants as 32 bytes in element order: unsigned (Q4_x, Q5_x;
// the offset of Q4_0/Q5_0 comes off through the activations' sum) or Q8_0's signed bytes.
template <DType kType>
__m256i LegacyBytes(const uint8_t* b) {
  if constexpr (kType == DType::kQ8_0) return Load(b + 2);
  constexpr int kQs = kType == DType::kQ4_0   ? 2
                      : kType == DType::kQ4_1 ? 4
                      : kType == DType::kQ5_0 ? 6
                                              : 8;
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + kQs));
  const __m128i nibble = _mm_set1_epi8(0x0f);
  __m256i q = _mm256_setr_m128i(_mm_and_si128(packed, nibble),
                                _mm_and_si128(_mm_srli_epi16(packed, 4), nibble));
  if constexpr (kType == DType::kQ5_0 || kType == DType::kQ5_1) {
    uint32_t qh;
    std::memcpy(&qh, b + (kType == DType::kQ5_0 ? 2 : 4), 4);
    q = _mm256_or_si256(q, _mm256_and_si256(BitsToBytes(qh), _mm256_set1_epi8(0x10)));
  }
  return q;
}

template <DType kType, int R>
void RowsLegacy(const uint8_t* row, const Q8Block32* const* x, int64_t blocks, float* out) {
  constexpr int kBytes = LayoutOf(kType).bytes;
  constexpr int kOffset = kType == DType::kQ4_0 ? 8 : kType == DType::kQ5_0 ? 16 : 0;
  constexpr bool kMin = kType == DType::kQ4_1 || kType == DType::kQ5_1;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[R];
  float acc_min[R];
  for (int r = 0; r < R; ++r) {
    acc[r] = _mm256_setzero_ps();
    acc_min[r] = 0;
  }
  for (int64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = row + i * kBytes;
    const float d = Half(b);
    const __m256i q = LegacyBytes<kType>(b);
    // vpmaddubsw takes unsigned x signed: Q8_0's signed weights go in as |w| with their
    // signs moved onto the activations.
    const __m256i uq = kType == DType::kQ8_0 ? _mm256_sign_epi8(q, q) : q;
    for (int r = 0; r < R; ++r) {
      const Q8Block32& a = x[r][i];
      __m256i y = Load(a.qs);
      if constexpr (kType == DType::kQ8_0) y = _mm256_sign_epi8(y, q);
      __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(uq, y), ones);
      if constexpr (kOffset != 0) {
        s = _mm256_sub_epi32(s, _mm256_setr_epi32(kOffset * a.sum, 0, 0, 0, 0, 0, 0, 0));
      }
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d * a.d), _mm256_cvtepi32_ps(s), acc[r]);
      if constexpr (kMin) acc_min[r] += Half(b + 2) * a.s;
    }
  }
  for (int r = 0; r < R; ++r) out[r] = Sum8(acc[r]) + acc_min[r];
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
