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

// Prefill tiles (DrivePanels): 5 x 5 accumulators, 5 rows of x and one vector of W in
// registers (31 of 32). A panel of 5 rows of W gives 25 products per 5 loads from L2.
constexpr int kPanelR = 5;
constexpr int kPanelC = 5;
// From this many rows of x on; below, packing W costs more than it saves (measured at
// m = 8 and 16 on 2048 x 2048).
constexpr int64_t kPanelMinRows = 32;
// Panel steps prefetched ahead (the panel is in L2; this brings it to L1).
constexpr int64_t kPanelAhead = 8;
// A tile's rows of x per chunk of steps: 5 rows of 64 steps (2048 values), so that rows
// of 2048 (the 1B shape's) take one chunk and rows of 8192 four; 24 KiB was ~5 % slower on
// k = 8192, 12 KiB ~5 % slower on k = 2048 (kernel_bench-style runs, one thread).
constexpr int64_t kXTileBytes = int64_t{20} << 10;

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

// Prefill: a block of W's rows is packed into panels of C rows, step by step (C x 32
// values per step, zeros past k), so that a tile reads one sequential stream from L2
// instead of C rows 2 * k bytes apart. The first tile of x over a panel reads W's rows
// (from memory, as it would anyway) and writes the panel as it goes; every later tile
// reads the panel. Long rows are taken in chunks of steps so that a tile's rows of x
// stay in L1; between chunks the accumulators wait in `partial` as they are, so every
// output element gets the same additions in the same order as DpBf16Kernel's.
struct PanelArgs {
  uint16_t* panel;  // this panel's steps [s0, s0 + steps)
  int64_t s0;
  int64_t steps;
  __m512* partial;  // R x C accumulators of this tile
  bool first;       // s0 == 0
  bool last;        // s0 + steps covers k
};

template <int R, int C, bool kFill>
void PanelTile(const GemmArgs& a, int64_t i0, int64_t j0, const PanelArgs& pa) {
  const uint16_t* x[R];
  BATON_UNROLL
  for (int r = 0; r < R; ++r) x[r] = a.xb + (i0 + r) * a.xb_stride + pa.s0 * 32;
  const uint8_t* w[C];
  BATON_UNROLL
  for (int c = 0; c < C; ++c) w[c] = a.w + (j0 + c) * a.w_row_bytes + pa.s0 * 64;
  __m512 acc[R][C];
  BATON_UNROLL
  for (int r = 0; r < R; ++r) {
    BATON_UNROLL
    for (int c = 0; c < C; ++c) acc[r][c] = pa.first ? _mm512_setzero_ps() : pa.partial[r * C + c];
  }
  const int64_t k_left = a.k - pa.s0 * 32;
  for (int64_t s = 0; s < pa.steps; ++s) {
    uint16_t* p = pa.panel + s * C * 32;
    __mmask32 mask = 0;
    if constexpr (kFill) {
      // The next panel's rows, as PrefetchNextTile does for a lone row of x.
      BATON_UNROLL
      for (int c = 0; c < C; ++c) __builtin_prefetch(w[c] + C * a.w_row_bytes + s * 64, 0, 3);
      const int64_t left = k_left - s * 32;
      mask = static_cast<__mmask32>(left >= 32 ? ~uint32_t{0} : (uint32_t{1} << left) - 1);
    } else {
      _mm_prefetch(reinterpret_cast<const char*>(p + kPanelAhead * C * 32), _MM_HINT_T0);
      if constexpr (C > 2) {
        _mm_prefetch(reinterpret_cast<const char*>(p + kPanelAhead * C * 32 + 64), _MM_HINT_T0);
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
  if (pa.last) {
    StoreTile<R, C>(a, i0, j0, acc);
    return;
  }
  BATON_UNROLL
  for (int r = 0; r < R; ++r) {
    BATON_UNROLL
    for (int c = 0; c < C; ++c) pa.partial[r * C + c] = acc[r][c];
  }
}

using PanelFn = void (*)(const GemmArgs&, int64_t, int64_t, const PanelArgs&);

struct PanelTable {
  PanelFn fn[2][kPanelR][kPanelC];  // [fill][R - 1][C - 1]
};

template <int R, int C>
constexpr void FillPanelTable(PanelTable& t) {
  t.fn[0][R - 1][C - 1] = &PanelTile<R, C, false>;
  t.fn[1][R - 1][C - 1] = &PanelTile<R, C, true>;
  if constexpr (C < kPanelC) {
    FillPanelTable<R, C + 1>(t);
  } else if constexpr (R < kPanelR) {
    FillPanelTable<R + 1, 1>(t);
  }
}

constexpr PanelTable MakePanelTable() {
  PanelTable t{};
  FillPanelTable<1, 1>(t);
  return t;
}

void DrivePanels(const GemmArgs& a, int64_t j0, int64_t j1) {
  static constexpr PanelTable kTable = MakePanelTable();
  const int64_t steps = (a.k + 31) / 32;
  const int64_t chunk = MinI64(steps, kXTileBytes / (kPanelR * 64));
  int64_t block_rows = kBlockBytes / (chunk * 64);
  block_rows = block_rows < kPanelC ? kPanelC : block_rows / kPanelC * kPanelC;
  block_rows = MinI64(block_rows, (j1 - j0 + kPanelC - 1) / kPanelC * kPanelC);
  const int64_t m_tiles = (a.m + kPanelR - 1) / kPanelR;
  const int64_t panel_floats = block_rows * chunk * 16;
  const int64_t partial_floats = chunk < steps ? m_tiles * kPanelR * block_rows * 16 : 0;
  float* scratch = ThreadScratch(static_cast<size_t>(panel_floats + partial_floats));
  auto* panels = reinterpret_cast<uint16_t*>(scratch);
  auto* partial = reinterpret_cast<__m512*>(scratch + panel_floats);
  for (int64_t jb = j0; jb < j1; jb += block_rows) {
    const int64_t je = MinI64(jb + block_rows, j1);
    for (int64_t s0 = 0; s0 < steps; s0 += chunk) {
      PanelArgs pa;
      pa.s0 = s0;
      pa.steps = MinI64(chunk, steps - s0);
      pa.first = s0 == 0;
      pa.last = s0 + pa.steps == steps;
      for (int64_t i = 0; i < a.m; i += kPanelR) {
        const int64_t r = MinI64(kPanelR, a.m - i);
        for (int64_t j = jb; j < je; j += kPanelC) {
          const int64_t c = MinI64(kPanelC, je - j);
          pa.panel = panels + (j - jb) * pa.steps * 32;
          pa.partial = partial + (i * block_rows + (j - jb) * kPanelR);
          kTable.fn[i == 0 ? 1 : 0][r - 1][c - 1](a, i, j, pa);
        }
      }
    }
  }
}

}  // namespace

void GemmAvx512Bf16(const GemmArgs& a, int64_t j0, int64_t j1) {
  if (a.m >= kPanelMinRows) {
    DrivePanels(a, j0, j1);
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
