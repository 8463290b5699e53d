// AVX2 + FMA + F16C kernels for f32, f16, bf16 and Q8_0 weights.
//
// Each output element owns one 8-lane f32 accumulator: lane l sums x[kk] * w[kk] over
// kk = l (mod 8) in increasing kk by fused multiply-add, the last partial vector zero
// filled; the lanes are then added in a fixed tree. Weights are widened to f32 exactly
// (Q8_0: the f32 product d * q). Tiles of R rows of x by C rows of W only share loads.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/matmul_tiles_inl.h"

namespace baton::cpu::internal {
namespace {

inline float Reduce8(__m256 v) {
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  const __m128 s1 = _mm_add_ss(s2, _mm_movehdup_ps(s2));
  return _mm_cvtss_f32(s1);
}

template <int R, int C>
inline void StoreTile(const GemmArgs& a, int64_t i0, int64_t j0, __m256 (&acc)[R][C]) {
  BATON_UNROLL
  for (int r = 0; r < R; ++r) {
    float* y = a.y + (i0 + r) * a.y_stride + j0;
    BATON_UNROLL
    for (int c = 0; c < C; ++c) {
      float s = Reduce8(acc[r][c]);
      if (a.bias != nullptr) s += a.bias[j0 + c];
      y[c] = s;
    }
  }
}

inline uint16_t LoadU16(const uint8_t* p) {
  uint16_t v = 0;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Load: 8 weights at element kk widened to f32. Widen1: one weight (for the tail, which
// goes through a zero-padded copy; the widening is exact either way).
struct F32Weights {
  static constexpr int kBytes = 4;
  static __m256 Load(const uint8_t* row, int64_t kk) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + kk);
  }
  static float Widen1(const uint8_t* row, int64_t kk) {
    float v = 0;
    std::memcpy(&v, row + 4 * kk, sizeof(v));
    return v;
  }
};

struct F16Weights {
  static constexpr int kBytes = 2;
  static __m256 Load(const uint8_t* row, int64_t kk) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * kk)));
  }
  static float Widen1(const uint8_t* row, int64_t kk) { return _cvtsh_ss(LoadU16(row + 2 * kk)); }
};

struct Bf16Weights {
  static constexpr int kBytes = 2;
  static __m256 Load(const uint8_t* row, int64_t kk) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * kk));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static float Widen1(const uint8_t* row, int64_t kk) {
    const uint32_t bits = static_cast<uint32_t>(LoadU16(row + 2 * kk)) << 16;
    float v = 0;
    std::memcpy(&v, &bits, sizeof(v));
    return v;
  }
};

// kRows x kCols tiles: 2 x 4 where every weight vector is widened in the loop (it costs
// an op per multiply-add then), 3 x 4 over rows already widened to f32 (12 accumulators,
// 3 rows of x and a weight vector: the 16 registers).
template <class Weights, int kRows = 2, int kCols = 4>
struct WideningKernel {
  static constexpr int kR = kRows;
  static constexpr int kC = kCols;
  static constexpr int kWide = 8;

  template <int R, int C>
  static void Tile(const GemmArgs& a, int64_t i0, int64_t j0) {
    const float* x[R];
    const uint8_t* w[C];
    BATON_UNROLL
    for (int r = 0; r < R; ++r) x[r] = a.x + (i0 + r) * a.x_stride;
    BATON_UNROLL
    for (int c = 0; c < C; ++c) w[c] = a.w + (j0 + c) * a.w_row_bytes;
    __m256 acc[R][C];
    BATON_UNROLL
    for (int r = 0; r < R; ++r) {
      BATON_UNROLL
      for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
    }
    const int64_t k = a.k;
    int64_t kk = 0;
    for (; kk + 8 <= k; kk += 8) {
      PrefetchNextTile<R, C>(w, a.w_row_bytes, static_cast<int64_t>(Weights::kBytes) * kk);
      __m256 xv[R];
      BATON_UNROLL
      for (int r = 0; r < R; ++r) xv[r] = _mm256_loadu_ps(x[r] + kk);
      BATON_UNROLL
      for (int c = 0; c < C; ++c) {
        const __m256 wv = Weights::Load(w[c], kk);
        BATON_UNROLL
        for (int r = 0; r < R; ++r) acc[r][c] = _mm256_fmadd_ps(xv[r], wv, acc[r][c]);
      }
    }
    if (kk < k) {
      const int64_t left = k - kk;
      __m256 xv[R];
      BATON_UNROLL
      for (int r = 0; r < R; ++r) {
        alignas(32) float t[8] = {};
        std::memcpy(t, x[r] + kk, sizeof(float) * left);
        xv[r] = _mm256_load_ps(t);
      }
      BATON_UNROLL
      for (int c = 0; c < C; ++c) {
        alignas(32) float t[8] = {};
        for (int64_t e = 0; e < left; ++e) t[e] = Weights::Widen1(w[c], kk + e);
        const __m256 wv = _mm256_load_ps(t);
        BATON_UNROLL
        for (int r = 0; r < R; ++r) acc[r][c] = _mm256_fmadd_ps(xv[r], wv, acc[r][c]);
      }
    }
    StoreTile<R, C>(a, i0, j0, acc);
  }
};

// Q8_0: per block of 32, w = f32(q) * d, then the same accumulation as above (lane l
// takes elements l, l + 8, l + 16 and l + 24 of the block, in that order).
struct Q8Kernel {
  static constexpr int kR = 2;
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
    __m256 acc[R][C];
    BATON_UNROLL
    for (int r = 0; r < R; ++r) {
      BATON_UNROLL
      for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
    }
    const int64_t blocks = a.k / 32;
    for (int64_t b = 0; b < blocks; ++b) {
      PrefetchNextTile<R, C>(w, a.w_row_bytes, 34 * b);
      BATON_UNROLL
      for (int c = 0; c < C; ++c) {
        const uint8_t* blk = w[c] + 34 * b;
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(LoadU16(blk)));
        BATON_UNROLL
        for (int part = 0; part < 4; ++part) {
          const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + 2 + 8 * part));
          const __m256 wv = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), d);
          BATON_UNROLL
          for (int r = 0; r < R; ++r) {
            const __m256 xv = _mm256_loadu_ps(x[r] + 32 * b + 8 * part);
            acc[r][c] = _mm256_fmadd_ps(xv, wv, acc[r][c]);
          }
        }
      }
    }
    StoreTile<R, C>(a, i0, j0, acc);
  }
};

// Prefill tiles for DrivePanels (matmul_tiles_inl.h): W widened to f32 once, as the first
// tile of x reads it, into panels of 4 rows; steps of 8 values. The same fused
// multiply-adds per element as WideningKernel, the last partial step zero-filled (x by a
// masked load, W in the panel).
template <class Weights>
struct FmaPanels {
  // 3 x 4 accumulators, 3 rows of x and a weight vector: the 16 registers.
  static constexpr int kR = 3;
  static constexpr int kC = 4;
  static constexpr int64_t kStepValues = 8;
  static constexpr int64_t kPanelStepBytes = 32;
  static constexpr int64_t kXStepBytes = 32;
  static constexpr int64_t kAccBytes = 32;
  // 3 rows of 128 steps (1024 values) of f32. One thread, m = 512, bf16 weights, Zen 5:
  // k = 8192 72 -> 97 GFLOP/s against rows of x whole, other shapes within noise; 16 and
  // 24 KiB were 8-15 % slower on k = 8192 (and L1 is 32 KiB on Zen 2 and 3).
  static constexpr int64_t kXTileBytes = int64_t{12} << 10;
  static constexpr int64_t kAhead = 8;

  template <int R, int C, bool kFill>
  static void Tile(const GemmArgs& a, int64_t i0, int64_t j0, const PanelArgs& pa) {
    const float* x[R];
    BATON_UNROLL
    for (int r = 0; r < R; ++r) x[r] = a.x + (i0 + r) * a.x_stride + pa.s0 * 8;
    const uint8_t* w[C];
    BATON_UNROLL
    for (int c = 0; c < C; ++c) w[c] = a.w + (j0 + c) * a.w_row_bytes;
    auto* panel = static_cast<float*>(pa.panel);
    __m256 acc[R][C];
    StartPanelTile<R, C>(pa, _mm256_setzero_ps(), acc);
    const int64_t k_left = a.k - pa.s0 * 8;  // values from this chunk's first
    const int64_t full = MinI64(pa.steps, k_left / 8);
    for (int64_t s = 0; s < full; ++s) {
      float* p = panel + s * C * 8;
      const int64_t kk = (pa.s0 + s) * 8;
      if constexpr (kFill) {
        BATON_UNROLL
        for (int c = 0; c < C; ++c) {
          __builtin_prefetch(w[c] + C * a.w_row_bytes + Weights::kBytes * kk, 0, 3);
        }
      } else {
        _mm_prefetch(reinterpret_cast<const char*>(p + kAhead * C * 8), _MM_HINT_T0);
        if constexpr (C > 2) {
          _mm_prefetch(reinterpret_cast<const char*>(p + kAhead * C * 8 + 16), _MM_HINT_T0);
        }
      }
      __m256 xv[R];
      BATON_UNROLL
      for (int r = 0; r < R; ++r) xv[r] = _mm256_loadu_ps(x[r] + s * 8);
      BATON_UNROLL
      for (int c = 0; c < C; ++c) {
        __m256 wv;
        if constexpr (kFill) {
          wv = Weights::Load(w[c], kk);
          _mm256_store_ps(p + c * 8, wv);
        } else {
          wv = _mm256_load_ps(p + c * 8);
        }
        BATON_UNROLL
        for (int r = 0; r < R; ++r) acc[r][c] = _mm256_fmadd_ps(xv[r], wv, acc[r][c]);
      }
    }
    if (full < pa.steps) {  // the row's last values, fewer than 8
      const int64_t left = k_left - full * 8;
      float* p = panel + full * C * 8;
      const int64_t kk = (pa.s0 + full) * 8;
      const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(left)),
                                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
      __m256 xv[R];
      BATON_UNROLL
      for (int r = 0; r < R; ++r) xv[r] = _mm256_maskload_ps(x[r] + full * 8, mask);
      BATON_UNROLL
      for (int c = 0; c < C; ++c) {
        if constexpr (kFill) {
          for (int64_t e = 0; e < 8; ++e)
            p[c * 8 + e] = e < left ? Weights::Widen1(w[c], kk + e) : 0.0f;
        }
        const __m256 wv = _mm256_load_ps(p + c * 8);
        BATON_UNROLL
        for (int r = 0; r < R; ++r) acc[r][c] = _mm256_fmadd_ps(xv[r], wv, acc[r][c]);
      }
    }
    if (EndPanelTile<R, C>(pa, acc)) StoreTile<R, C>(a, i0, j0, acc);
  }
};

// Rows of x from which prefill takes FmaPanels for f32, f16 and bf16 weights.
constexpr int64_t kPanelRows = 16;

}  // namespace

void GemmAvx2(const GemmArgs& a, int64_t j0, int64_t j1) {
  const bool panels = a.m >= kPanelRows && a.k > 0;
  switch (a.dtype) {
    case DType::kF32:
      if (panels) return DrivePanels<FmaPanels<F32Weights>>(a, j0, j1);
      return DriveTiles<WideningKernel<F32Weights>>(a, j0, j1);
    case DType::kF16:
      if (panels) return DrivePanels<FmaPanels<F16Weights>>(a, j0, j1);
      return DriveTiles<WideningKernel<F16Weights>>(a, j0, j1);
    case DType::kBF16:
      if (panels) return DrivePanels<FmaPanels<Bf16Weights>>(a, j0, j1);
      return DriveTiles<WideningKernel<Bf16Weights>>(a, j0, j1);
    case DType::kQ8_0:
      return DriveTiles<Q8Kernel>(a, j0, j1);
    default:
      return DriveDequantized<WideningKernel<F32Weights>, DequantRowAvx2>(a, j0, j1);
  }
}

}  // namespace baton::cpu::internal
