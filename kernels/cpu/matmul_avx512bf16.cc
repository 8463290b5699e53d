// AVX512_BF16 kernel for bf16 weights: x is rounded to bf16 once per call (round to
// nearest even, zero-padded to a multiple of 32 columns) and vdpbf16ps multiplies it with
// W as stored, so a row of W is loaded and used without any widening.
//
// Each output element owns one 16-lane accumulator; for every 32 columns, lane l adds
// the products of columns 2l and 2l+1 of that block (the instruction's own order), the
// last block's W masked to zero beyond k. The lanes are then added in a fixed tree.
#include "kernels/cpu/simd.h"

#include <cstdint>

#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/matmul_tiles_inl.h"
#include "kernels/cpu/reduce_avx512_inl.h"

namespace baton::cpu::internal {
namespace {

// Rows of x from which prefill takes DpBf16Panels; below, packing W costs more than it
// saves (measured at m = 8 and 16 on 2048 x 2048).
constexpr int64_t kPanelMinRows = 32;

inline __m512 Dot(__m512 acc, __m512i x, __m512i w) {
  return _mm512_dpbf16_ps(acc, (__m512bh)x, (__m512bh)w);
}

struct DpBf16Kernel {
  static constexpr int kR = 4;
  static constexpr int kC = 4;
  static constexpr int kWide = 8;

  template <int R, int C>
  static void Tile(const GemmArgs& a, int64_t i0, int64_t j0) {
    const uint16_t* x[R];
    const uint8_t* w[C];
    BATON_UNROLL
    for (int r = 0; r < R; ++r) x[r] = a.xb + (i0 + r) * a.xb_stride;
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
    for (; kk + 32 <= k; kk += 32) {
      PrefetchNextTile<R, C>(w, a.w_row_bytes, 2 * kk);
      __m512i xv[R];
      BATON_UNROLL
      for (int r = 0; r < R; ++r) xv[r] = _mm512_loadu_si512(x[r] + kk);
      BATON_UNROLL
      for (int c = 0; c < C; ++c) {
        const __m512i wv = _mm512_loadu_si512(w[c] + 2 * kk);
        BATON_UNROLL
        for (int r = 0; r < R; ++r) acc[r][c] = Dot(acc[r][c], xv[r], wv);
      }
    }
    if (kk < k) {
      const auto mask = static_cast<__mmask32>((uint32_t{1} << (k - kk)) - 1);
      __m512i xv[R];
      BATON_UNROLL
      for (int r = 0; r < R; ++r) xv[r] = _mm512_loadu_si512(x[r] + kk);  // zero-padded
      BATON_UNROLL
      for (int c = 0; c < C; ++c) {
        const __m512i wv = _mm512_maskz_loadu_epi16(mask, w[c] + 2 * kk);
        BATON_UNROLL
        for (int r = 0; r < R; ++r) acc[r][c] = Dot(acc[r][c], xv[r], wv);
      }
    }
    StoreTile<R, C>(a, i0, j0, acc);
  }
};

// Prefill tiles for DrivePanels (matmul_tiles_inl.h): x and W in steps of 32 values.
struct DpBf16Panels {
  // 5 x 5 accumulators, 5 rows of x and one vector of W in registers (31 of 32): 25
  // products per 5 loads from the L2 stream.
  static constexpr int kR = 5;
  static constexpr int kC = 5;
  static constexpr int64_t kStepValues = 32;
  static constexpr int64_t kPanelStepBytes = 64;
  static constexpr int64_t kXStepBytes = 64;
  static constexpr int64_t kAccBytes = 64;
  // 5 rows of 64 steps (2048 values): rows of 2048 (the 1B shape's) take one chunk and
  // rows of 8192 four; 24 KiB was a few % slower on k = 8192, 12 KiB ~5 % slower on
  // k = 2048 (one thread, m = 512).
  static constexpr int64_t kXTileBytes = int64_t{20} << 10;
  // Panel steps prefetched ahead (the panel is in L2; this brings it to L1).
  static constexpr int64_t kAhead = 8;

  template <int R, int C, bool kFill>
  static void Tile(const GemmArgs& a, int64_t i0, int64_t j0, const PanelArgs& pa) {
    const uint16_t* x[R];
    BATON_UNROLL
    for (int r = 0; r < R; ++r) x[r] = a.xb + (i0 + r) * a.xb_stride + pa.s0 * 32;
    const uint8_t* w[C];
    BATON_UNROLL
    for (int c = 0; c < C; ++c) w[c] = a.w + (j0 + c) * a.w_row_bytes + pa.s0 * 64;
    auto* panel = static_cast<uint16_t*>(pa.panel);
    __m512 acc[R][C];
    StartPanelTile<R, C>(pa, _mm512_setzero_ps(), acc);
    const int64_t k_left = a.k - pa.s0 * 32;
    for (int64_t s = 0; s < pa.steps; ++s) {
      uint16_t* p = panel + s * C * 32;
      __mmask32 mask = 0;
      if constexpr (kFill) {
        // The next panel's rows, as PrefetchNextTile does for a lone row of x.
        BATON_UNROLL
        for (int c = 0; c < C; ++c) __builtin_prefetch(w[c] + C * a.w_row_bytes + s * 64, 0, 3);
        const int64_t left = k_left - s * 32;
        mask = static_cast<__mmask32>(left >= 32 ? ~uint32_t{0} : (uint32_t{1} << left) - 1);
      } else {
        _mm_prefetch(reinterpret_cast<const char*>(p + kAhead * C * 32), _MM_HINT_T0);
        if constexpr (C > 2) {
          _mm_prefetch(reinterpret_cast<const char*>(p + kAhead * C * 32 + 64), _MM_HINT_T0);
        }
      }
      __m512i xv[R];
      BATON_UNROLL
      for (int r = 0; r < R; ++r) xv[r] = _mm512_loadu_si512(x[r] + s * 32);
      BATON_UNROLL
      for (int c = 0; c < C; ++c) {
        __m512i wv;
        if constexpr (kFill) {
          wv = _mm512_maskz_loadu_epi16(mask, w[c] + s * 64);
          _mm512_store_si512(p + c * 32, wv);
        } else {
          wv = _mm512_load_si512(p + c * 32);
        }
        BATON_UNROLL
        for (int r = 0; r < R; ++r) acc[r][c] = Dot(acc[r][c], xv[r], wv);
      }
    }
    if (EndPanelTile<R, C>(pa, acc)) StoreTile<R, C>(a, i0, j0, acc);
  }
};

}  // namespace

void GemmAvx512Bf16(const GemmArgs& a, int64_t j0, int64_t j1) {
  if (a.m >= kPanelMinRows && a.k > 0) {
    DrivePanels<DpBf16Panels>(a, j0, j1);
    return;
  }
  DriveTiles<DpBf16Kernel>(a, j0, j1);
}

void PackBf16Avx512Bf16(const float* x, int64_t x_stride, int64_t r0, int64_t r1, int64_t k,
                        uint16_t* out, int64_t out_stride, int64_t padded_k) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* src = x + r * x_stride;
    uint16_t* dst = out + r * out_stride;
    int64_t kk = 0;
    for (; kk + 16 <= k; kk += 16) {
      const __m256bh h = _mm512_cvtneps_pbh(_mm512_loadu_ps(src + kk));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + kk), (__m256i)h);
    }
    // The tail and the padding: masked-off lanes load as +0, which converts to bf16 +0.
    for (; kk < padded_k; kk += 16) {
      const int64_t left = k - kk;
      const auto mask = static_cast<__mmask16>(left >= 16  ? 0xffffu
                                               : left <= 0 ? 0u
                                                           : (1u << left) - 1);
      const __m256bh h = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(mask, src + kk));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + kk), (__m256i)h);
    }
  }
}

}  // namespace baton::cpu::internal
