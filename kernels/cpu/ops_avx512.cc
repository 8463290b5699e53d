// Elementwise ops with AVX-512F. Compiled with -mavx512f (isa_flags.cmake); ops.cc calls
// them only when the CPU has AVX-512.
#include "kernels/cpu/simd.h"

#include <cstdint>

#include "kernels/cpu/exp_avx512_inl.h"
#include "kernels/cpu/ops_internal.h"

namespace baton::cpu::internal {

void SwiGluAvx512(const float* gate, const float* up, int64_t n, float* out) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const int64_t left = n - i;
    const auto mask = static_cast<__mmask16>(left >= 16 ? 0xffffu : (1u << left) - 1);
    const __m512 g = _mm512_maskz_loadu_ps(mask, gate + i);
    const __m512 u = _mm512_maskz_loadu_ps(mask, up + i);
    const __m512 e = Exp(_mm512_sub_ps(_mm512_setzero_ps(), g));
    const __m512 silu = _mm512_div_ps(g, _mm512_add_ps(one, e));
    _mm512_mask_storeu_ps(out + i, mask, _mm512_mul_ps(silu, u));
  }
}

void FloatToBf16RowAvx512(const float* x, int64_t n, uint16_t* out) {
  // bf16.h's FloatToBf16 on 16 lanes: the same integer rounding, then NaN lanes replaced.
  const __m512i one = _mm512_set1_epi32(1);
  const __m512i half = _mm512_set1_epi32(0x7fff);
  const __m512i magnitude = _mm512_set1_epi32(0x7fffffff);
  const __m512i inf = _mm512_set1_epi32(0x7f800000);
  const __m512i nan = _mm512_set1_epi32(0x7fff);
  for (int64_t i = 0; i < n; i += 16) {
    const int64_t left = n - i;
    const auto mask = static_cast<__mmask16>(left >= 16 ? 0xffffu : (1u << left) - 1);
    const __m512i v = _mm512_castps_si512(_mm512_maskz_loadu_ps(mask, x + i));
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(v, 16), one);
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(v, _mm512_add_epi32(half, odd)), 16);
    const __mmask16 is_nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(v, magnitude), inf);
    r = _mm512_mask_mov_epi32(r, is_nan, nan);
    _mm512_mask_cvtepi32_storeu_epi16(out + i, mask, r);
  }
}

}  // namespace baton::cpu::internal
