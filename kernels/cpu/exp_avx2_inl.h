// exp on 8 floats for the AVX2 kernel files. Included only by files built with -mavx2
// -mfma, after <immintrin.h>; internal linkage, so each file has its own copy.
#pragma once

namespace baton::cpu::internal {
namespace {  // NOLINT(google-build-namespaces): one copy per ISA file is the point.

// exp(x) with the polynomial of exp_avx512_inl.h (Cephes expf, about 1 ulp), for
// x <= 88.3: the kernels pass score - max <= 0, so there is no overflow to handle. Below
// -87.3 it returns exp(-87.3), about 1.2e-38, where exp underflows to a subnormal or 0:
// negligible next to the 1 that the largest score gives a softmax.
inline __m256 Exp(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.3f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // r = x - n ln2, in two parts for accuracy.
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  const __m256 r2 = _mm256_mul_ps(r, r);
  p = _mm256_fmadd_ps(p, r2, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  // There is no scalef: 2^n is built from its exponent bits, n + 127, which lies in
  // [1, 254] for x in [-87.3, 88.3], so 2^n is a normal float and the product is p * 2^n
  // rounded once, as scalef gives it.
  const __m256i biased = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
  return _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(biased, 23)));
}

}  // namespace
}  // namespace baton::cpu::internal
