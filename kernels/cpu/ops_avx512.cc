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

}  // namespace baton::cpu::internal
