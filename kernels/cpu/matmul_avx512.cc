// AVX-512 (F/BW/VL/DQ) kernels for f32, f16, bf16 and Q8_0 weights.
//
// Each output element owns one 16-lane f32 accumulator: lane l sums x[kk] * w[kk] over
// kk = l (mod 16) in increasing kk by fused multiply-add, the last partial vector zero
// filled; the lanes are then added in a fixed tree. Weights are widened to f32 exactly
// (Q8_0: the f32 product d * q). Tiles of R rows of x by C rows of W only share loads.
#include "kernels/cpu/simd.h"

#include <cstdint>
#include <cstring>

#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/matmul_tiles_inl.h"
#include "kernels/cpu/reduce_avx512_inl.h"

namespace baton::cpu::internal {
namespace {

// Widen 16 weights at element kk of a row to f32.
struct F32Weights {
  static constexpr int kBytes = 4;
  static __m512 Load(const uint8_t* row, int64_t kk) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + kk);
  }
  static __m512 LoadMasked(const uint8_t* row, int64_t kk, __mmask16 mask) {
    return _mm512_maskz_loadu_ps(mask, reinterpret_cast<const float*>(row) + kk);
  }
};

struct F16Weights {
  static constexpr int kBytes = 2;
  static __m512 Load(const uint8_t* row, int64_t kk) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * kk)));
  }
  static __m512 LoadMasked(const uint8_t* row, int64_t kk, __mmask16 mask) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, row + 2 * kk));
  }
};

struct Bf16Weights {
  static constexpr int kBytes = 2;
  static __m512 Widen(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static __m512 Load(const uint8_t* row, int64_t kk) {
    return Widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * kk)));
  }
  static __m512 LoadMasked(const uint8_t* row, int64_t kk, __mmask16 mask) {
    return Widen(_mm256_maskz_loadu_epi16(mask, row + 2 * kk));
  }
};

template <class Weights>
struct WideningKernel {
  static constexpr int kR = 4;
  static constexpr int kC = 4;
  static constexpr int kWide = 8;

  template <int R, int C>
  static void Tile(const GemmArgs& a, int64_t i0, int64_t j0) {
    const float* x[R];
    const uint8_t* w[C];
    BATON_UNROLL
    for (int r = 0; r < R; ++r) x[r] = a.x + (i0 + r) * a.x_stride;
    BATON_UNROLL
    for (int c = 0; c < C; ++c) w[c] = a.w + (j0 + c) * a.w_row_bytes;
    __m512 acc[R][C];
    BATON_UNROLL
    for (int r = 0; r < R; ++r) {
      BATON_UNROLL
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
    }
    const int64_t k = a.k;
    int64_t kk = 0;
    for (; kk + 16 <= k; kk += 16) {
      PrefetchNextTile<R, C>(w, a.w_row_bytes, static_cast<int64_t>(Weights::kBytes) * kk);
      __m512 xv[R];
      BATON_UNROLL
      for (int r = 0; r < R; ++r) xv[r] = _mm512_loadu_ps(x[r] + kk);
      BATON_UNROLL
      for (int c = 0; c < C; ++c) {
        const __m512 wv = Weights::Load(w[c], kk);
        BATON_UNROLL
        for (int r = 0; r < R; ++r) acc[r][c] = _mm512_fmadd_ps(xv[r], wv, acc[r][c]);
      }
    }
    if (kk < k) {
      const auto mask = static_cast<__mmask16>((1u << (k - kk)) - 1);
      __m512 xv[R];
      BATON_UNROLL
      for (int r = 0; r < R; ++r) xv[r] = _mm512_maskz_loadu_ps(mask, x[r] + kk);
      BATON_UNROLL
      for (int c = 0; c < C; ++c) {
        const __m512 wv = Weights::LoadMasked(w[c], kk, mask);
        BATON_UNROLL
        for (int r = 0; r < R; ++r) acc[r][c] = _mm512_fmadd_ps(xv[r], wv, acc[r][c]);
      }
    }
    StoreTile<R, C>(a, i0, j0, acc);
  }
};

// Q8_0: per block of 32, w = f32(q) * d, then the same accumulation as above (lane l
// takes elements l and l + 16 of the block, in that order).
struct Q8Kernel {
  static constexpr int kR = 4;
  static constexpr int kC = 4;
  static constexpr int kWide = 8;

  template <int R, int C>
  static void Tile(const GemmArgs& a, int64_t i0, int64_t j0) {
    const float* x[R];
    const uint8_t* w[C];
    BATON_UNROLL
    for (int r = 0; r < R; ++r) x[r] = a.x + (i0 + r) * a.x_stride;
    BATON_UNROLL
    for (int c = 0; c < C; ++c) w[c] = a.w + (j0 + c) * a.w_row_bytes;
    __m512 acc[R][C];
    BATON_UNROLL
    for (int r = 0; r < R; ++r) {
      BATON_UNROLL
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
    }
    const int64_t blocks = a.k / 32;
    for (int64_t b = 0; b < blocks; ++b) {
      PrefetchNextTile<R, C>(w, a.w_row_bytes, 34 * b);
      __m512 x0[R];
      __m512 x1[R];
      BATON_UNROLL
      for (int r = 0; r < R; ++r) {
        x0[r] = _mm512_loadu_ps(x[r] + 32 * b);
        x1[r] = _mm512_loadu_ps(x[r] + 32 * b + 16);
      }
      BATON_UNROLL
      for (int c = 0; c < C; ++c) {
        const uint8_t* blk = w[c] + 34 * b;
        uint16_t dh = 0;
        std::memcpy(&dh, blk, sizeof(dh));
        const __m512 d = _mm512_set1_ps(_cvtsh_ss(dh));
        const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
        const __m128i q1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 18));
        const __m512 w0 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q0)), d);
        const __m512 w1 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q1)), d);
        BATON_UNROLL
        for (int r = 0; r < R; ++r) {
          acc[r][c] = _mm512_fmadd_ps(x0[r], w0, acc[r][c]);
          acc[r][c] = _mm512_fmadd_ps(x1[r], w1, acc[r][c]);
        }
      }
    }
    StoreTile<R, C>(a, i0, j0, acc);
  }
};

}  // namespace

void GemmAvx512(const GemmArgs& a, int64_t j0, int64_t j1) {
  switch (a.dtype) {
    case DType::kF32:
      return DriveTiles<WideningKernel<F32Weights>>(a, j0, j1);
    case DType::kF16:
      return DriveTiles<WideningKernel<F16Weights>>(a, j0, j1);
    case DType::kBF16:
      return DriveTiles<WideningKernel<Bf16Weights>>(a, j0, j1);
    case DType::kQ8_0:
      return DriveTiles<Q8Kernel>(a, j0, j1);
    default:
      return DriveDequantized<WideningKernel<F32Weights>, DequantRowAvx512>(a, j0, j1);
  }
}

}  // namespace baton::cpu::internal
