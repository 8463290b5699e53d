// AttendOneQuery with AVX-512F, for head_dim a multiple of 16. Compiled with -mavx512f
// (isa_flags.cmake); attention.cc calls it only when the CPU has AVX-512.
//
// Per query, in three passes over its keys, always in key order from position 0:
//   1. scores: 16 keys at a time, each key's 16-lane partial dot products reduced by a
//      fixed transpose-and-add tree, so every key's sum has one fixed order;
//   2. exp(score - max) with a fixed polynomial (Cephes expf), and their sum;
//   3. the weighted sum of V rows, key by key.
// Nothing depends on other queries, on where a prefill chunk starts or on the thread, so
// a query's result is the same in any batch.
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "kernels/cpu/attention_internal.h"

namespace baton::cpu::internal {
namespace {

// exp(x) for x <= 0 (scores minus their max); below -87.3 the result is 0 in float anyway.
__m512 Exp(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.3f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // r = x - n ln2, in two parts for accuracy.
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  const __m512 r2 = _mm512_mul_ps(r, r);
  p = _mm512_fmadd_ps(p, r2, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);  // p * 2^n
}

// r[j] = the sum of v[j]'s 16 lanes, for 16 vectors, by a fixed tree.
__m512 ReduceAdd16(const __m512 v[16]) {
  __m512 a[8];
  for (int i = 0; i < 8; ++i) {  // per 128-bit lane: [x0+x2, y0+y2, x1+x3, y1+y3]
    a[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]),
                         _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  }
  __m512 b[4];
  for (int i = 0; i < 4; ++i) {  // per 128-bit lane: keys 4i..4i+3, partial over the lane
    const __m512d x = _mm512_castps_pd(a[2 * i]), y = _mm512_castps_pd(a[2 * i + 1]);
    b[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)),
                         _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
  }
  // Sum the four 128-bit lanes of each b[i]: two rounds of lane transposes.
  const __m512 s01 =
      _mm512_add_ps(_mm512_shuffle_f32x4(b[0], b[1], 0x88), _mm512_shuffle_f32x4(b[0], b[1], 0xDD));
  const __m512 s23 =
      _mm512_add_ps(_mm512_shuffle_f32x4(b[2], b[3], 0x88), _mm512_shuffle_f32x4(b[2], b[3], 0xDD));
  return _mm512_add_ps(_mm512_shuffle_f32x4(s01, s23, 0x88), _mm512_shuffle_f32x4(s01, s23, 0xDD));
}

}  // namespace

void AttendOneQueryAvx512(const float* q, int64_t pos, int64_t kv_head, const int32_t* block_table,
                          const PagedKvView& kv, float scale, float* scores, float* out) {
  const int64_t token_stride = kv.num_kv_heads * kv.head_dim;
  const int64_t head_offset = kv_head * kv.head_dim;
  const int64_t chunks = kv.head_dim / 16;  // head_dim <= 256 (checked by the caller)
  const int64_t n = pos + 1;
  auto row = [&](const float* base, int64_t t) {
    return base + block_table[t / kv.block_size] * kv.block_stride +
           (t % kv.block_size) * token_stride + head_offset;
  };

  __m512 qv[16];
  for (int64_t c = 0; c < chunks; ++c) qv[c] = _mm512_loadu_ps(q + 16 * c);
  const __m512 scale_v = _mm512_set1_ps(scale);
  __m512 max_v = _mm512_set1_ps(-INFINITY);
  for (int64_t t0 = 0; t0 < n; t0 += 16) {
    const int64_t count = n - t0 < 16 ? n - t0 : 16;
    __m512 partial[16];
    for (int64_t j = 0; j < 16; ++j) {
      partial[j] = _mm512_setzero_ps();
      if (j >= count) continue;
      const float* key = row(kv.k, t0 + j);
      for (int64_t c = 0; c < chunks; ++c) {
        partial[j] = _mm512_fmadd_ps(qv[c], _mm512_loadu_ps(key + 16 * c), partial[j]);
      }
    }
    const __mmask16 mask = static_cast<__mmask16>((1u << count) - 1);
    const __m512 s = _mm512_mul_ps(ReduceAdd16(partial), scale_v);
    _mm512_mask_storeu_ps(scores + t0, mask, s);
    max_v = _mm512_mask_max_ps(max_v, mask, max_v, s);
  }
  const __m512 max_b = _mm512_set1_ps(_mm512_reduce_max_ps(max_v));

  __m512 sum_v = _mm512_setzero_ps();
  for (int64_t t0 = 0; t0 < n; t0 += 16) {
    const int64_t count = n - t0 < 16 ? n - t0 : 16;
    const __mmask16 mask = static_cast<__mmask16>((1u << count) - 1);
    const __m512 e = Exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask, scores + t0), max_b));
    _mm512_mask_storeu_ps(scores + t0, mask, e);
    sum_v = _mm512_mask_add_ps(sum_v, mask, sum_v, e);
  }
  // A fixed tree over the 16 lanes (reduce_add's order is the compiler's choice).
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum_v);
  float sum = 0;
  for (int step = 8; step >= 1; step /= 2) {
    for (int i = 0; i < step; ++i) lanes[i] += lanes[i + step];
  }
  sum = lanes[0];

  __m512 acc[16];
  for (int64_t c = 0; c < chunks; ++c) acc[c] = _mm512_setzero_ps();
  for (int64_t t = 0; t < n; ++t) {
    const __m512 w = _mm512_set1_ps(scores[t]);
    const float* value = row(kv.v, t);
    for (int64_t c = 0; c < chunks; ++c) {
      acc[c] = _mm512_fmadd_ps(w, _mm512_loadu_ps(value + 16 * c), acc[c]);
    }
  }
  const __m512 inv = _mm512_set1_ps(1.0f / sum);
  for (int64_t c = 0; c < chunks; ++c) _mm512_storeu_ps(out + 16 * c, _mm512_mul_ps(acc[c], inv));
}

}  // namespace baton::cpu::internal
