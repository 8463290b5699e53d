// Elementwise ops with AVX2 and FMA. Compiled with the AVX2 flags (isa_flags.cmake);
// ops.cc calls them only when the CPU has AVX2.
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/exp_avx2_inl.h"
#include "kernels/cpu/ops_internal.h"

namespace baton::cpu::internal {

void SwiGluAvx2(const float* gate, const float* up, int64_t n, float* out) {
  const __m256 one = _mm256_set1_ps(1.0f);
  // exp_avx2_inl.h's Exp holds up to 88.3. Past it (gate below -88.3) the result is -0,
  // g times zero, as the scalar loop gives once exp(-g) overflows at 88.72; in between the
  // true value is below 4e-37 in magnitude. (-inf gives NaN there and here.)
  const __m256 limit = _mm256_set1_ps(88.3f);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int64_t i = 0; i < n; i += 8) {
    const int64_t left = n - i;
    const __m256i mask =
        _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(left < 8 ? left : 8)), lane);
    const __m256 g = _mm256_maskload_ps(gate + i, mask);
    const __m256 u = _mm256_maskload_ps(up + i, mask);
    const __m256 neg = _mm256_sub_ps(_mm256_setzero_ps(), g);
    const __m256 near = _mm256_div_ps(g, _mm256_add_ps(one, Exp(_mm256_min_ps(neg, limit))));
    const __m256 far = _mm256_mul_ps(g, _mm256_setzero_ps());
    const __m256 silu = _mm256_blendv_ps(near, far, _mm256_cmp_ps(neg, limit, _CMP_GT_OQ));
    _mm256_maskstore_ps(out + i, mask, _mm256_mul_ps(silu, u));
  }
}

}  // namespace baton::cpu::internal
