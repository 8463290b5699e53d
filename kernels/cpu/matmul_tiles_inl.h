// The loop nest shared by the SIMD kernel files. Included only by matmul_<isa>.cc; every
// name here has internal linkage, so each ISA file gets its own copy compiled with its
// own flags (see matmul_internal.h for why that matters).
//
// A kernel K provides register tiles: K::Tile<R, C>(args, i0, j0) computes
// y[i0:i0+R, j0:j0+C] for any R <= kR, C <= kWide, with the same arithmetic per output
// element whatever R and C are. The driver only chooses which tiles to run: kR x kC, or
// 1 x kWide for a lone row.
#pragma once

#include <cstdint>

#include "kernels/cpu/matmul_internal.h"

// The tile loops over R and C must be unrolled completely, or the accumulators live on the
// stack instead of in registers (GCC at -O2 does not unroll them by itself).
#define BATON_UNROLL _Pragma("GCC unroll 16")

namespace baton::cpu::internal {
namespace {  // NOLINT(google-build-namespaces): one copy per ISA file is the point.

using TileFn = void (*)(const GemmArgs&, int64_t, int64_t);

// Tiles for every R <= kR and C <= kWide (kWide >= kC): a single row of x gets tiles of up
// to kWide rows of W, so that decode still has enough independent accumulator chains to
// hide the multiply-add latency.
template <class K>
struct TileTable {
  TileFn fn[K::kR][K::kWide];
};

// f.template operator()<R, C>() for every 1 <= R <= kMaxR and 1 <= C <= kMaxC.
template <int kMaxR, int kMaxC, int R = 1, int C = 1, class F>
constexpr void ForEachTileShape(F& f) {
  f.template operator()<R, C>();
  if constexpr (C < kMaxC) {
    ForEachTileShape<kMaxR, kMaxC, R, C + 1>(f);
  } else if constexpr (R < kMaxR) {
    ForEachTileShape<kMaxR, kMaxC, R + 1, 1>(f);
  }
}

template <class K>
constexpr TileTable<K> MakeTileTable() {
  TileTable<K> t{};
  auto fill = [&t]<int R, int C>() { t.fn[R - 1][C - 1] = &K::template Tile<R, C>; };
  ForEachTileShape<K::kR, K::kWide>(fill);
  return t;
}

inline int64_t MinI64(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t MaxI64(int64_t a, int64_t b) { return a > b ? a : b; }

// Decode streams W from memory once, tile after tile, and a tile's rows are consecutive
// rows of W, so the next tile's rows start right after its own, on pages where the
// hardware prefetchers start over.
// - A lone row of x (decode): each step asks for the bytes the same step of the next tile
//   will read, one tile ahead, in the order they will be used. On the 135M shapes (rows
//   of 1152 bytes, too short for the prefetchers to get going) this cut kernel_bench's
//   m = 1 times by 4-23 %, and by 6-11 % on the 1B shapes (medians of five alternating
//   runs). Two tiles ahead was no better.
// - Several rows (prefill) reuse W from cache: while a tile reads the last kPrefetchAhead
//   bytes of its rows, it prefetches the first ones of the next tile's rows.
// `done` is the bytes of each row read so far.
constexpr int64_t kPrefetchAhead = 256;

template <int R, int C>
inline void PrefetchNextTile(const uint8_t* const (&w)[C], size_t row_bytes, int64_t done) {
  if constexpr (R == 1) {
    BATON_UNROLL
    for (int c = 0; c < C; ++c) __builtin_prefetch(w[c] + C * row_bytes + done, 0, 3);
  } else {
    const int64_t ahead = done + kPrefetchAhead - static_cast<int64_t>(row_bytes);
    if (ahead >= 0) {
      BATON_UNROLL
      for (int c = 0; c < C; ++c) __builtin_prefetch(w[c] + C * row_bytes + ahead, 0, 3);
    }
  }
}

// W rows [j0, j1) are taken in blocks of about kBlockBytes, so that with several rows of
// x (prefill) a block stays in L2 while every x tile passes over it. With one row of x
// (decode) this is just a sequential sweep of W.
constexpr int64_t kBlockBytes = int64_t{256} << 10;

template <class K>
void DriveTiles(const GemmArgs& a, int64_t j0, int64_t j1) {
  static_assert(K::kWide % K::kC == 0);
  static constexpr TileTable<K> kTiles = MakeTileTable<K>();
  int64_t block_rows = kBlockBytes / static_cast<int64_t>(a.w_row_bytes > 0 ? a.w_row_bytes : 1);
  block_rows = block_rows < K::kWide ? K::kWide : block_rows / K::kWide * K::kWide;
  for (int64_t jb = j0; jb < j1; jb += block_rows) {
    const int64_t je = MinI64(jb + block_rows, j1);
    for (int64_t i = 0; i < a.m; i += K::kR) {
      const int64_t r = MinI64(K::kR, a.m - i);
      const int64_t width = r == 1 ? K::kWide : K::kC;
      for (int64_t j = jb; j < je; j += width) {
        kTiles.fn[r - 1][MinI64(width, je - j) - 1](a, i, j);
      }
    }
  }
}

// Prefill over panels. A block of about kBlockBytes of W's rows is packed into panels of
// K::kC rows, step by step (K::kC x K::kStepValues values per step, zeros past k), so
// that a tile reads one sequential stream from L2 instead of C rows far apart. The first
// tile of x over a panel reads W's rows (from memory, as it would anyway) and writes the
// panel as it goes; every later tile reads the panel. Long rows are taken in chunks of
// steps so that a tile's rows of x (K::kXTileBytes) stay in L1 while the block's panels go
// by; between chunks the accumulators wait in memory as they are. So every output element
// gets the same operations in the same order as the kernel's plain tiles.
//
// K provides kR, kC (the largest tile), kStepValues (values of k per step),
// kPanelStepBytes (bytes of a panel row per step), kXStepBytes (the same for a row of x),
// kAccBytes (one accumulator), kXTileBytes, and Tile<R, C, kFill>(args, i0, j0, PanelArgs)
// for every R <= kR, C <= kC.
struct PanelArgs {
  void* panel;  // this panel's steps [s0, s0 + steps)
  int64_t s0 = 0;
  int64_t steps = 0;
  void* partial;       // this tile's R x C accumulators between chunks
  bool first = false;  // s0 == 0
  bool last = false;   // s0 + steps covers k
};

using PanelFn = void (*)(const GemmArgs&, int64_t, int64_t, const PanelArgs&);

// A panel tile's accumulators (V: the ISA's vector): zero in the first chunk of steps,
// else as the previous chunk left them.
template <int R, int C, class V>
inline void StartPanelTile(const PanelArgs& pa, V zero, V (&acc)[R][C]) {
  const V* partial = static_cast<const V*>(pa.partial);
  BATON_UNROLL
  for (int r = 0; r < R; ++r) {
    BATON_UNROLL
    for (int c = 0; c < C; ++c) acc[r][c] = pa.first ? zero : partial[r * C + c];
  }
}

// After a chunk: true in the last one (the caller sums and stores the tile), else the
// accumulators are kept for the next chunk.
template <int R, int C, class V>
inline bool EndPanelTile(const PanelArgs& pa, V (&acc)[R][C]) {
  if (pa.last) return true;
  V* partial = static_cast<V*>(pa.partial);
  BATON_UNROLL
  for (int r = 0; r < R; ++r) {
    BATON_UNROLL
    for (int c = 0; c < C; ++c) partial[r * C + c] = acc[r][c];
  }
  return false;
}

template <class K>
struct PanelTable {
  PanelFn fn[2][K::kR][K::kC];  // [fill][R - 1][C - 1]
};

template <class K>
constexpr PanelTable<K> MakePanelTable() {
  PanelTable<K> t{};
  auto fill = [&t]<int R, int C>() {
    t.fn[0][R - 1][C - 1] = &K::template Tile<R, C, false>;
    t.fn[1][R - 1][C - 1] = &K::template Tile<R, C, true>;
  };
  ForEachTileShape<K::kR, K::kC>(fill);
  return t;
}

template <class K>
void DrivePanels(const GemmArgs& a, int64_t j0, int64_t j1) {  // k > 0
  static constexpr PanelTable<K> kTable = MakePanelTable<K>();
  constexpr int64_t kR = K::kR;
  constexpr int64_t kC = K::kC;
  const int64_t steps = (a.k + K::kStepValues - 1) / K::kStepValues;
  const int64_t chunk = MinI64(steps, K::kXTileBytes / (kR * K::kXStepBytes));
  // Blocks of about kBlockBytes, as many as fit best, equal and in whole panels: a range
  // of 64 rows with blocks of 60 would take a second pass over every row of x for 4 rows
  // of W.
  const int64_t budget = MaxI64(kC, kBlockBytes / (chunk * K::kPanelStepBytes));
  const int64_t blocks = MaxI64(1, (j1 - j0 + budget / 2) / budget);
  const int64_t block_rows = ((j1 - j0 + blocks - 1) / blocks + kC - 1) / kC * kC;
  const int64_t m_tiles = (a.m + kR - 1) / kR;
  const int64_t panel_bytes = block_rows * chunk * K::kPanelStepBytes;
  const int64_t partial_bytes = chunk < steps ? m_tiles * kR * block_rows * K::kAccBytes : 0;
  auto* scratch = reinterpret_cast<uint8_t*>(
      ThreadScratch(static_cast<size_t>(panel_bytes + partial_bytes) / 4));
  for (int64_t jb = j0; jb < j1; jb += block_rows) {
    const int64_t je = MinI64(jb + block_rows, j1);
    for (int64_t s0 = 0; s0 < steps; s0 += chunk) {
      PanelArgs pa;
      pa.s0 = s0;
      pa.steps = MinI64(chunk, steps - s0);
      pa.first = s0 == 0;
      pa.last = s0 + pa.steps == steps;
      for (int64_t i = 0; i < a.m; i += kR) {
        const int64_t r = MinI64(kR, a.m - i);
        for (int64_t j = jb; j < je; j += kC) {
          const int64_t c = MinI64(kC, je - j);
          pa.panel = scratch + (j - jb) * pa.steps * K::kPanelStepBytes;
          pa.partial = partial_bytes == 0 ? nullptr
                                          : scratch + panel_bytes +
                                                (i * block_rows + (j - jb) * kR) * K::kAccBytes;
          kTable.fn[i == 0 ? 1 : 0][r - 1][c - 1](a, i, j, pa);
        }
      }
    }
  }
}

// Block-quantized W: its rows are dequantized into this thread's f32 scratch, a group at a
// time, and K (an f32-weight kernel) multiplies the group. Every output element is K's
// arithmetic on DequantizeRow's values, however the rows are grouped, so the result is
// bit for bit the product with the dequantized matrix. One row of x (decode): a group is
// one wide tile, still in L1 when K reads it. Several rows: about kBlockBytes of f32,
// dequantized once and reused by every tile of x.
template <class K, void (*kDequantRow)(DType, const uint8_t*, int64_t, float*)>
void DriveDequantized(const GemmArgs& a, int64_t j0, int64_t j1) {
  const int64_t k = a.k;
  int64_t group = K::kWide;
  if (a.m > 1) {
    const int64_t fit = kBlockBytes / (4 * (k > 0 ? k : 1));
    group = fit <= K::kWide ? K::kWide : fit / K::kWide * K::kWide;
  }
  group = MinI64(group, j1 - j0);
  if (group <= 0) return;
  float* w = ThreadScratch(static_cast<size_t>(group * k));
  GemmArgs f = a;
  f.dtype = DType::kF32;
  f.w = reinterpret_cast<const uint8_t*>(w);
  f.w_row_bytes = static_cast<size_t>(4 * k);
  for (int64_t j = j0; j < j1; j += group) {
    const int64_t n = MinI64(group, j1 - j);
    for (int64_t r = 0; r < n; ++r) {
      const uint8_t* row = a.w + (j + r) * a.w_row_bytes;
      // Decode: ask for the same row of the next group while this one dequantizes, as
      // PrefetchNextTile does for unquantized rows (the pause while K multiplies the group
      // otherwise leaves the hardware prefetchers behind).
      if (a.m == 1 && j + group + r < j1) {
        const uint8_t* next = row + group * a.w_row_bytes;
        for (size_t off = 0; off < a.w_row_bytes; off += 64) __builtin_prefetch(next + off, 0, 3);
      }
      kDequantRow(a.dtype, row, k, w + r * k);
    }
    f.y = a.y + j;
    f.bias = a.bias != nullptr ? a.bias + j : nullptr;
    DriveTiles<K>(f, 0, n);
  }
}

}  // namespace
}  // namespace baton::cpu::internal
