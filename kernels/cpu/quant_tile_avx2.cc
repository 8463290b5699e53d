// Weights of the types with an int8 product times many activation rows with AVX2 alone:
// the int8 product of prefill on CPUs without AVX-512 VNNI (AVX2-only EPYCs).
//
// The row-by-row kernels (quant_dot_avx2.cc) leave each block's products spread over the
// 8 lanes of a register, so every block of every (row of x, row of W) pair pays a
// horizontal sum. Here, as in quant_tile_avx512vnni.cc, 16 rows of W are unpacked once per
// call into panels with four consecutive k of one column in each 32-bit lane (8 columns
// per register), so a block's products land in its column's lane and nothing is summed
// across lanes. vpmaddubsw multiplies the unsigned quants by the activations' four bytes
// (broadcast) into pairs of 16 bits, and since the quants are small, several steps add up
// in 16 bits before one vpmaddwd widens them: Q4 types 8 steps (8 * 2 * 15 * 127 < 2^15),
// Q5 types 4 (4 * 2 * 31 * 127 < 2^15), Q8_0 one, its signed quants going in as |w| with
// the signs moved onto the activations (2 * 128 * 127 < 2^15). The K-quants the same way
// per group (runs of Q4_K 8 steps, Q5_K 4, Q6_K 2 of its unsigned q + 32), the widening vpmaddwd
// taking the group's scale as its other operand; the mins (Q4_K, Q5_K) and Q6_K's 32 come
// in through the activations' group sums. The integer totals are the row-by-row kernels'
// own, and each column's lane keeps the same running sums in the same order
// (FinishLanes8's and AddBlockK's, quant_dot_inl.h), so y has the same bits either way.
// The 32-value blocks go lane by lane (blocks l, l + 8, ... for running sum l), so one
// register per column group holds a running sum at a time.
//
// GCC's reassociation and temporary expression replacement turn the chains of 16- and
// 32-bit adds below into trees that hold every product at once: 16 registers do not, and
// the spills cost up to a third of the speed (RowsK<2, Q4_K>: 53 stack accesses -> 10).
// Before every include, so the helpers carry the same options and still inline.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-tree-reassoc", "no-tree-ter")
#endif
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "common/check.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/quant_dot_simd_inl.h"

namespace baton::cpu::internal {
namespace {

constexpr int kCols = 16;  // two registers of 8 columns

// r[i] (8 dwords each) becomes column i of the 8 x 8 matrix whose rows they were.
void Transpose8(__m256i r[8]) {
  __m256i t[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  // u[4 g + c]: in 128-bit lane l, rows 4g..4g+3 of column 4l + c.
  __m256i u[8];
  for (int g = 0; g < 2; ++g) {
    u[4 * g] = _mm256_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 1] = _mm256_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 2] = _mm256_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
    u[4 * g + 3] = _mm256_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
  }
  for (int c = 0; c < 4; ++c) {
    r[c] = _mm256_permute2x128_si256(u[c], u[4 + c], 0x20);
    r[4 + c] = _mm256_permute2x128_si256(u[c], u[4 + c], 0x31);
  }
}

int32_t Bytes4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Two values that fit 16 bits as one 32-bit lane of vpmaddwd's pairs: lo in bits 0-15.
int32_t Int16Pair(int32_t lo, int32_t hi) {
  return static_cast<int32_t>((static_cast<uint32_t>(lo) & 0xffffu) |
                              (static_cast<uint32_t>(hi) << 16));
}

// One 32-value block of 16 rows of W.
struct alignas(32) Panel32 {
  uint8_t q[8][kCols][4];  // q[t][c]: values 4t..4t+3 of column c (Q8_0 signed)
  float d[kCols];
  float m[kCols];  // Q4_1, Q5_1: the minimum
};

template <DType kType>
constexpr int kLegacyOffset = kType == DType::kQ4_0   ? 8
                              : kType == DType::kQ5_0 ? 16
                                                      : 0;

// Steps of four values whose vpmaddubsw pairs add up in 16 bits without overflow.
template <DType kType>
constexpr int kRun = kType == DType::kQ8_0                              ? 1
                     : (kType == DType::kQ5_0 || kType == DType::kQ5_1) ? 4
                                                                        : 8;

// Rows j..j+15 of W, every block, into panels[0, blocks).
template <DType kType>
void Unpack32(const GemmArgs& a, int64_t j, int64_t blocks, Panel32* panels) {
  constexpr size_t kBytes = LayoutOf(kType).bytes;
  constexpr bool kMin = kType == DType::kQ4_1 || kType == DType::kQ5_1;
  for (int64_t b = 0; b < blocks; ++b) {
    Panel32* p = panels + b;
    for (int half = 0; half < 2; ++half) {
      __m256i r[8];
      for (int c = 0; c < 8; ++c) {
        const uint8_t* blk = a.w + (j + 8 * half + c) * a.w_row_bytes + b * kBytes;
        p->d[8 * half + c] = Half(blk);
        p->m[8 * half + c] = kMin ? Half(blk + 2) : 0.0f;
        r[c] = LegacyBytes<kType>(blk);
      }
      Transpose8(r);
      for (int t = 0; t < 8; ++t) {
        _mm256_store_si256(reinterpret_cast<__m256i*>(p->q[t][8 * half]), r[t]);
      }
    }
  }
}

// y[i + r, j..j+15] for R rows of x from the panels, in FinishLanes8's order.
template <int R, DType kType>
void Rows32(const GemmArgs& a, const Panel32* panels, int64_t blocks, int64_t i, int64_t j) {
  constexpr bool kMin = kType == DType::kQ4_1 || kType == DType::kQ5_1;
  constexpr bool kSigned = kType == DType::kQ8_0;
  const Q8Block32* x[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) x[r] = a.xq32 + (i + r) * a.xq_stride;
  const __m256i ones = _mm256_set1_epi16(1);
  alignas(32) float lanes[R][8][kCols];
  for (int l = 0; l < 8; ++l) {
    __m256 acc[R][2];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (int64_t b = l; b < blocks; b += 8) {
      const Panel32& p = panels[b];
      __m256i dot[R][2];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        dot[r][0] = dot[r][1] = _mm256_set1_epi32(-kLegacyOffset<kType> * x[r][b].sum);
      }
#pragma GCC unroll 8
      for (int t0 = 0; t0 < 8; t0 += kRun<kType>) {
        __m256i run[R][2];
#pragma GCC unroll 8
        for (int t = t0; t < t0 + kRun<kType>; ++t) {
          const __m256i w0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(p.q[t][0]));
          const __m256i w1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(p.q[t][8]));
          const __m256i u0 = kSigned ? _mm256_sign_epi8(w0, w0) : w0;
          const __m256i u1 = kSigned ? _mm256_sign_epi8(w1, w1) : w1;
#pragma GCC unroll 8
          for (int r = 0; r < R; ++r) {
            const __m256i xv = _mm256_set1_epi32(Bytes4(x[r][b].qs + 4 * t));
            const __m256i p0 = _mm256_maddubs_epi16(u0, kSigned ? _mm256_sign_epi8(xv, w0) : xv);
            const __m256i p1 = _mm256_maddubs_epi16(u1, kSigned ? _mm256_sign_epi8(xv, w1) : xv);
            run[r][0] = t == t0 ? p0 : _mm256_add_epi16(run[r][0], p0);
            run[r][1] = t == t0 ? p1 : _mm256_add_epi16(run[r][1], p1);
          }
        }
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          dot[r][0] = _mm256_add_epi32(dot[r][0], _mm256_madd_epi16(run[r][0], ones));
          dot[r][1] = _mm256_add_epi32(dot[r][1], _mm256_madd_epi16(run[r][1], ones));
        }
      }
      const __m256 d0 = _mm256_load_ps(p.d);
      const __m256 d1 = _mm256_load_ps(p.d + 8);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m256 dx = _mm256_set1_ps(x[r][b].d);
        acc[r][0] =
            _mm256_fmadd_ps(_mm256_mul_ps(d0, dx), _mm256_cvtepi32_ps(dot[r][0]), acc[r][0]);
        acc[r][1] =
            _mm256_fmadd_ps(_mm256_mul_ps(d1, dx), _mm256_cvtepi32_ps(dot[r][1]), acc[r][1]);
        if constexpr (kMin) {
          const __m256 sx = _mm256_set1_ps(x[r][b].s);
          acc[r][0] = _mm256_fmadd_ps(_mm256_load_ps(p.m), sx, acc[r][0]);
          acc[r][1] = _mm256_fmadd_ps(_mm256_load_ps(p.m + 8), sx, acc[r][1]);
        }
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      _mm256_store_ps(lanes[r][l], acc[r][0]);
      _mm256_store_ps(lanes[r][l] + 8, acc[r][1]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    for (int h = 0; h < kCols; h += 8) {
      auto lane = [&](int l) { return _mm256_load_ps(lanes[r][l] + h); };
      __m256 v = _mm256_add_ps(
          _mm256_add_ps(_mm256_add_ps(lane(0), lane(4)), _mm256_add_ps(lane(2), lane(6))),
          _mm256_add_ps(_mm256_add_ps(lane(1), lane(5)), _mm256_add_ps(lane(3), lane(7))));
      if (a.bias != nullptr) v = _mm256_add_ps(v, _mm256_loadu_ps(a.bias + j + h));
      _mm256_storeu_ps(a.y + (i + r) * a.y_stride + j + h, v);
    }
  }
}

template <DType kType>
void Tile32(const GemmArgs& a, int64_t j) {
  const int64_t blocks = a.k / kQ8Block32;
  auto* panels = reinterpret_cast<Panel32*>(
      ThreadScratch(static_cast<size_t>(blocks) * sizeof(Panel32) / sizeof(float)));
  Unpack32<kType>(a, j, blocks, panels);
  ForRowGroups<2>(a.m, [&](auto rows, int64_t i) {
    Rows32<decltype(rows)::value, kType>(a, panels, blocks, i, j);
  });
}

// One 256-value K-quant block of 16 rows of W.
struct alignas(32) PanelK {
  uint8_t q[64][kCols][4];   // q[t][c]: values 4t..4t+3 of column c, unsigned
  int32_t scale[16][kCols];  // the group's scale in both 16-bit halves (vpmaddwd's pairs)
  // Pairs of 16 bits: Q4_K/Q5_K the mins of groups 2p and 2p + 1 (p < 4); Q6_K the scales of
  // groups 2p and 2p + 1 (p < 8), for the 32 its unsigned quants carry.
  int32_t pairs[8][kCols];
  float d[kCols];
  float dmin[kCols];
};

template <DType kType>
void UnpackK(const GemmArgs& a, int64_t j, int64_t blocks, PanelK* panels) {
  constexpr size_t kBytes = LayoutOf(kType).bytes;
  constexpr bool kSix = kType == DType::kQ6_K;
  KBlockParts parts[8];
  for (int64_t b = 0; b < blocks; ++b) {
    PanelK* p = panels + b;
    for (int half = 0; half < 2; ++half) {
      for (int c = 0; c < 8; ++c) {
        const int col = 8 * half + c;
        KBlockParts& u = parts[c];
        UnpackKBlock<kType>(a.w + (j + col) * a.w_row_bytes + b * kBytes, &u);
        p->d[col] = u.d;
        p->dmin[col] = u.dmin;
        for (int g = 0; g < 16; ++g) p->scale[g][col] = Int16Pair(u.scale[g], u.scale[g]);
        for (int q = 0; q < 8; ++q) {
          const int32_t* v = kSix ? u.scale : u.min;
          p->pairs[q][col] = q < (kSix ? 8 : 4) ? Int16Pair(v[2 * q], v[2 * q + 1]) : 0;
        }
      }
      for (int s = 0; s < 8; ++s) {
        __m256i r[8];
        for (int c = 0; c < 8; ++c) r[c] = Load(parts[c].q + 32 * s);
        Transpose8(r);
        for (int t = 0; t < 8; ++t) {
          _mm256_store_si256(reinterpret_cast<__m256i*>(p->q[8 * s + t][8 * half]), r[t]);
        }
      }
    }
  }
}

// Steps of four values per group, and how many add up in 16 bits (Q4_K 8 * 2 * 15 * 127,
// Q5_K 4 * 2 * 31 * 127, Q6_K 2 * 2 * 63 * 127, all < 2^15) before vpmaddwd applies the
// group's scale.
template <DType kType>
constexpr int kStepsK = kType == DType::kQ6_K ? 4 : 8;
template <DType kType>
constexpr int kRunK = kType == DType::kQ4_K   ? 8
                      : kType == DType::kQ5_K ? 4
                                              : 2;

// The activations' pair of 16-bit sums that meets PanelK::pairs[q]: Q4_K/Q5_K the sums of
// groups 2q and 2q + 1 (of 32), Q6_K of groups 2q and 2q + 1 (of 16).
template <DType kType>
int32_t PairSums(const Q8KBlock& x, int q) {
  if constexpr (kType == DType::kQ6_K) {
    return Int16Pair(x.bsums[2 * q], x.bsums[2 * q + 1]);
  } else {
    return Int16Pair(x.bsums[4 * q] + x.bsums[4 * q + 1], x.bsums[4 * q + 2] + x.bsums[4 * q + 3]);
  }
}

// y[i + r, j..j+15] for R rows of x from the panels, in AddBlockK's order.
template <int R, DType kType>
void RowsK(const GemmArgs& a, const PanelK* panels, int64_t blocks, int64_t i, int64_t j) {
  constexpr bool kSix = kType == DType::kQ6_K;
  constexpr int kGroups = kSix ? 16 : 8;
  constexpr int kSteps = kStepsK<kType>;
  constexpr int kRun = kRunK<kType>;
  const Q8KBlock* x[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) x[r] = a.xq + (i + r) * a.xq_stride;
  // AddBlockK's running sums: block b into accd[r][b % 4] and accm[r][b % 4].
  alignas(32) float accd[R][4][kCols] = {};
  alignas(32) float accm[R][4][kCols] = {};
  for (int64_t b = 0; b < blocks; ++b) {
    const PanelK& p = panels[b];
    __m256i sumi[R][2];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) sumi[r][0] = sumi[r][1] = _mm256_setzero_si256();
#pragma GCC unroll 1
    for (int g = 0; g < kGroups; ++g) {
#pragma GCC unroll 8
      for (int t0 = 0; t0 < kSteps; t0 += kRun) {
        __m256i run[R][2];
#pragma GCC unroll 8
        for (int t = t0; t < t0 + kRun; ++t) {
          const int step = kSteps * g + t;
          const __m256i w0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(p.q[step][0]));
          const __m256i w1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(p.q[step][8]));
#pragma GCC unroll 8
          for (int r = 0; r < R; ++r) {
            const __m256i xv = _mm256_set1_epi32(Bytes4(x[r][b].qs + 4 * step));
            const __m256i p0 = _mm256_maddubs_epi16(w0, xv);
            const __m256i p1 = _mm256_maddubs_epi16(w1, xv);
            run[r][0] = t == t0 ? p0 : _mm256_add_epi16(run[r][0], p0);
            run[r][1] = t == t0 ? p1 : _mm256_add_epi16(run[r][1], p1);
          }
        }
        const __m256i sc0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(p.scale[g]));
        const __m256i sc1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(p.scale[g] + 8));
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          sumi[r][0] = _mm256_add_epi32(sumi[r][0], _mm256_madd_epi16(run[r][0], sc0));
          sumi[r][1] = _mm256_add_epi32(sumi[r][1], _mm256_madd_epi16(run[r][1], sc1));
        }
      }
    }
    const int l = static_cast<int>(b % 4);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      // Q6_K: each group's scale times 32 times its activation sum comes off; Q4_K/Q5_K:
      // the mins times the groups' activation sums, for the dmin running sums.
      __m256i pair_sums[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
#pragma GCC unroll 8
      for (int q = 0; q < (kSix ? 8 : 4); ++q) {
        const __m256i s = _mm256_set1_epi32(PairSums<kType>(x[r][b], q));
        for (int h = 0; h < 2; ++h) {
          const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(p.pairs[q] + 8 * h));
          pair_sums[h] = _mm256_add_epi32(pair_sums[h], _mm256_madd_epi16(v, s));
        }
      }
      const __m256 dx = _mm256_set1_ps(x[r][b].d);
      for (int h = 0; h < 2; ++h) {
        __m256i si = sumi[r][h];
        if constexpr (kSix) si = _mm256_sub_epi32(si, _mm256_slli_epi32(pair_sums[h], 5));
        float* sd = accd[r][l] + 8 * h;
        _mm256_store_ps(sd, _mm256_fmadd_ps(_mm256_mul_ps(_mm256_load_ps(p.d + 8 * h), dx),
                                            _mm256_cvtepi32_ps(si), _mm256_load_ps(sd)));
        // Q6_K has no mins: the other paths' fma(dx * 0, 0, m) leaves m at +0 for every
        // finite dx (and an infinite dx makes d NaN in every path), so it is skipped.
        if constexpr (!kSix) {
          float* sm = accm[r][l] + 8 * h;
          _mm256_store_ps(sm,
                          _mm256_fmadd_ps(_mm256_mul_ps(_mm256_load_ps(p.dmin + 8 * h), dx),
                                          _mm256_cvtepi32_ps(pair_sums[h]), _mm256_load_ps(sm)));
        }
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    for (int h = 0; h < kCols; h += 8) {
      auto d = [&](int l) { return _mm256_load_ps(accd[r][l] + h); };
      auto m = [&](int l) { return _mm256_load_ps(accm[r][l] + h); };
      __m256 v = _mm256_sub_ps(_mm256_add_ps(_mm256_add_ps(d(0), d(2)), _mm256_add_ps(d(1), d(3))),
                               _mm256_add_ps(_mm256_add_ps(m(0), m(2)), _mm256_add_ps(m(1), m(3))));
      if (a.bias != nullptr) v = _mm256_add_ps(v, _mm256_loadu_ps(a.bias + j + h));
      _mm256_storeu_ps(a.y + (i + r) * a.y_stride + j + h, v);
    }
  }
}

template <DType kType>
void TileK(const GemmArgs& a, int64_t j) {
  const int64_t blocks = a.k / kQ8KBlock;
  auto* panels = reinterpret_cast<PanelK*>(
      ThreadScratch(static_cast<size_t>(blocks) * sizeof(PanelK) / sizeof(float)));
  UnpackK<kType>(a, j, blocks, panels);
  ForRowGroups<2>(a.m, [&](auto rows, int64_t i) {
    RowsK<decltype(rows)::value, kType>(a, panels, blocks, i, j);
  });
}

}  // namespace

bool TileQ8Avx2(const GemmArgs& a, int64_t j) {
  switch (a.dtype) {
    case DType::kQ8_0:
      Tile32<DType::kQ8_0>(a, j);
      return true;
    case DType::kQ4_0:
      Tile32<DType::kQ4_0>(a, j);
      return true;
    case DType::kQ5_0:
      Tile32<DType::kQ5_0>(a, j);
      return true;
    case DType::kQ4_1:
      Tile32<DType::kQ4_1>(a, j);
      return true;
    case DType::kQ5_1:
      Tile32<DType::kQ5_1>(a, j);
      return true;
    case DType::kQ4_K:
      TileK<DType::kQ4_K>(a, j);
      return true;
    case DType::kQ5_K:
      TileK<DType::kQ5_K>(a, j);
      return true;
    case DType::kQ6_K:
      TileK<DType::kQ6_K>(a, j);
      return true;
    default:
      return false;
  }
}

}  // namespace baton::cpu::internal
