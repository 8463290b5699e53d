// Summing the 16 lanes of the AVX-512 kernels' accumulators and storing a tile. Included
// only by the AVX-512 matmul files, after <immintrin.h> and matmul_tiles_inl.h; every name
// has internal linkage, so each file gets its own copy built with its own flags.
//
// Every output element is the same tree over its accumulator's lanes: lanes i and i + 8,
// then i and i + 4, i and i + 2, i and i + 1.
#pragma once

#include <cstdint>

#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/matmul_tiles_inl.h"

namespace baton::cpu::internal {
namespace {  // NOLINT(google-build-namespaces): one copy per ISA file is the point.

inline float Reduce16(__m512 v) {
  const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  const __m128 s1 = _mm_add_ss(s2, _mm_movehdup_ps(s2));
  return _mm_cvtss_f32(s1);
}

// Reduce16 of up to 16 accumulators at once, with the same additions for each. Pairs of
// vectors share every shuffle, so 16 sums take 45 vector operations instead of 16 x 7,
// which matters when k is short (576 columns is 18 steps of the k loop). Returns the sum
// of v[i] in lane i; lanes from N on are junk.
template <int N>
inline __m512 ReduceMany(const __m512 (&v)[N]) {
  static_assert(N >= 1 && N <= 16);
  const __m512 zero = _mm512_setzero_ps();
  // a[i] = [lanes 0-7 + 8-15 of v[2i] | the same of v[2i+1]]
  __m512 a[8];
  BATON_UNROLL
  for (int i = 0; i < 8; ++i) {
    if (2 * i >= N) break;
    const __m512 x = v[2 * i], y = 2 * i + 1 < N ? v[2 * i + 1] : zero;
    a[i] = _mm512_add_ps(_mm512_shuffle_f32x4(x, y, 0x44), _mm512_shuffle_f32x4(x, y, 0xEE));
  }
  // b[i], 128-bit quarter q: four-lane sums of v[4i + q]
  __m512 b[4];
  BATON_UNROLL
  for (int i = 0; i < 4; ++i) {
    if (4 * i >= N) break;
    const __m512 x = a[2 * i], y = 4 * i + 2 < N ? a[2 * i + 1] : zero;
    b[i] = _mm512_add_ps(_mm512_shuffle_f32x4(x, y, 0x88), _mm512_shuffle_f32x4(x, y, 0xDD));
  }
  // c[i], quarter q: two-lane sums of v[8i + q], then of v[8i + 4 + q]
  __m512 c[2];
  BATON_UNROLL
  for (int i = 0; i < 2; ++i) {
    if (8 * i >= N) break;
    const __m512 x = b[2 * i], y = 8 * i + 4 < N ? b[2 * i + 1] : zero;
    c[i] = _mm512_add_ps(_mm512_shuffle_ps(x, y, 0x44), _mm512_shuffle_ps(x, y, 0xEE));
  }
  // d, quarter q: the sums of v[q], v[4 + q], v[8 + q], v[12 + q]; then transpose 4 x 4.
  const __m512 y = N > 8 ? c[1] : zero;
  const __m512 d =
      _mm512_add_ps(_mm512_shuffle_ps(c[0], y, 0x88), _mm512_shuffle_ps(c[0], y, 0xDD));
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_ps(order, d);
}

// y[i0 + r, j0 + c] = the sum of acc[r][c]'s lanes, plus the bias.
template <int R, int C>
inline void StoreTile(const GemmArgs& a, int64_t i0, int64_t j0, __m512 (&acc)[R][C]) {
  if constexpr (R * C <= 16) {
    __m512 flat[R * C];
    BATON_UNROLL
    for (int r = 0; r < R; ++r) {
      BATON_UNROLL
      for (int c = 0; c < C; ++c) flat[r * C + c] = acc[r][c];
    }
    alignas(64) float sums[16];
    _mm512_store_ps(sums, ReduceMany(flat));
    BATON_UNROLL
    for (int r = 0; r < R; ++r) {
      float* y = a.y + (i0 + r) * a.y_stride + j0;
      BATON_UNROLL
      for (int c = 0; c < C; ++c) {
        float s = sums[r * C + c];
        if (a.bias != nullptr) s += a.bias[j0 + c];
        y[c] = s;
      }
    }
  } else {
    BATON_UNROLL
    for (int r = 0; r < R; ++r) {
      float* y = a.y + (i0 + r) * a.y_stride + j0;
      BATON_UNROLL
      for (int c = 0; c < C; ++c) {
        float s = Reduce16(acc[r][c]);
        if (a.bias != nullptr) s += a.bias[j0 + c];
        y[c] = s;
      }
    }
  }
}

}  // namespace
}  // namespace baton::cpu::internal
