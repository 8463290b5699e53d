// Rows of activations to int8 blocks (quant_dot.h's QuantizeRowQ8K and QuantizeRowQ8Block32)
// with AVX2: the same bits as the plain loops in quant_dot.cc. The largest magnitude is
// order-free; every product, rounding and conversion is the plain loop's own, element by
// element (vcvtps2dq rounds to nearest even, as nearbyint does in the default mode, and
// gives INT_MIN for NaN and out of range, as the plain loops' RoundToInt), and the quants
// are the low bytes of the 32-bit values (never saturating packs), as LowByte takes them.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/matmul_internal.h"

namespace baton::cpu::internal {
namespace {

// The largest |x| over n values (a multiple of 8): a NaN never wins, as in
// std::max(acc, |x|) and `|x| > acc`.
float MaxAbs(const float* x, int n) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 acc = _mm256_setzero_ps();
  for (int j = 0; j < n; j += 8) {
    // vmaxps returns its second operand when either is NaN.
    acc = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)), acc);
  }
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}

// The low bytes of four vectors of 8 int32 (32 values in order) into out.
void StoreLowBytes(const __m256i v[4], int8_t* out) {
  const __m256i low = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                       0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
  for (int i = 0; i < 4; ++i) {
    const __m256i b = _mm256_shuffle_epi8(v[i], low);
    const int lo = _mm_cvtsi128_si32(_mm256_castsi256_si128(b));
    const int hi = _mm_cvtsi128_si32(_mm256_extracti128_si256(b, 1));
    std::memcpy(out + 8 * i, &lo, 4);
    std::memcpy(out + 8 * i + 4, &hi, 4);
  }
}

// The sum of the 8 int32 lanes of v.
int32_t Sum8(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

}  // namespace

void QuantizeRowQ8KAvx2(const float* x, int64_t k, Q8KBlock* out) {
  for (int64_t b = 0; b < k / kQ8KBlock; ++b, x += kQ8KBlock) {
    Q8KBlock& q = out[b];
    const float amax = MaxAbs(x, kQ8KBlock);
    if (amax == 0) {
      q = Q8KBlock{};
      continue;
    }
    // The value of largest magnitude: the first one (the plain loop keeps it on ties).
    float max = 0;
    const __m256 target = _mm256_set1_ps(amax);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int j = 0; j < kQ8KBlock; j += 8) {
      const __m256 v = _mm256_loadu_ps(x + j);
      const int hit =
          _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, v), target, _CMP_EQ_OQ));
      if (hit != 0) {
        max = x[j + __builtin_ctz(static_cast<unsigned>(hit))];
        break;
      }
    }
    const float iscale = -127.0f / max;
    const __m256 scale = _mm256_set1_ps(iscale);
    const __m256i cap = _mm256_set1_epi32(127);
    for (int g = 0; g < kQ8KBlock / 32; ++g) {
      __m256i v[4];
      for (int i = 0; i < 4; ++i) {
        const __m256 p = _mm256_mul_ps(scale, _mm256_loadu_ps(x + 32 * g + 8 * i));
        v[i] = _mm256_min_epi32(_mm256_cvtps_epi32(p), cap);
      }
      StoreLowBytes(v, q.qs + 32 * g);
      // The sums of 16 from the bytes as stored (what the plain loop adds).
      for (int h = 0; h < 2; ++h) {
        const __m128i bytes =
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(q.qs + 32 * g + 16 * h));
        const __m256i words = _mm256_cvtepi8_epi16(bytes);
        const __m256i pairs = _mm256_madd_epi16(words, _mm256_set1_epi16(1));
        q.bsums[2 * g + h] = static_cast<int16_t>(Sum8(pairs));
      }
    }
    q.d = 1.0f / iscale;
  }
}

void QuantizeRowQ8Block32Avx2(const float* x, int64_t k, Q8Block32* out) {
  for (int64_t b = 0; b < k / kQ8Block32; ++b, x += kQ8Block32) {
    Q8Block32& q = out[b];
    const float amax = MaxAbs(x, kQ8Block32);
    const float d = amax / 127.0f;
    const float id = amax != 0 ? 127.0f / amax : 0.0f;
    const __m256 scale = _mm256_set1_ps(id);
    __m256i v[4];
    for (int i = 0; i < 4; ++i) {
      v[i] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * i), scale));
    }
    StoreLowBytes(v, q.qs);
    const __m256i words =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q.qs)));
    const __m256i words2 =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q.qs + 16)));
    const int32_t sum =
        Sum8(_mm256_madd_epi16(_mm256_add_epi16(words, words2), _mm256_set1_epi16(1)));
    q.sum = sum;
    q.d = HalfToFloat(FloatToHalf(d));
    q.s = HalfToFloat(FloatToHalf(d * static_cast<float>(sum)));
  }
}

}  // namespace baton::cpu::internal
