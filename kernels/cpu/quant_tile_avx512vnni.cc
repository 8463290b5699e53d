// K-quant weights times many Q8K rows with AVX-512 VNNI: the int8 product of prefill.
//
// The row-by-row kernels (quant_dot_<isa>.cc) decode each weight block once per 4 rows of
// x and multiply bytes through vpmaddubsw and vpmaddwd. Here 16 rows of W (16 columns of
// y) are unpacked once per call into panels, one per 256-value block: the quants as bytes
// with four consecutive k of one column in each 32-bit lane, the group scales and mins as
// 32-bit lanes, d and dmin as f32 lanes. Then every row of x runs over the panels:
// vpdpbusd adds four u8 x s8 products into each column's lane (64 products per
// instruction, with the activations' four bytes broadcast), vpmulld applies the group
// scale, and the mins come in through vpdpwssd. The block's integer sums are the same
// integers the row-by-row kernels compute, and each lane then keeps AddBlockK's running sums
// (quant_dot_inl.h), so y has the same bits either way.
//
// The 32-value types (Q8_0, Q4_0, Q5_0, Q4_1, Q5_1) the same way with a panel per block of
// 32: no group scales; the offset (8, 16, or 128 for Q8_0, whose signed quants go in as
// w + 128) comes off through the activations' block sum, and the f32 part keeps
// FinishLanes8's eight running sums.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "common/check.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/quant_dot_simd_inl.h"

namespace baton::cpu::internal {
namespace {

constexpr int kCols = 16;

// One 256-value block of 16 rows of W.
struct alignas(64) Panel {
  uint8_t q[64][kCols][4];   // q[t][c]: values 4t..4t+3 of column c, unsigned
  int32_t scale[16][kCols];  // group scales: 8 groups of 32 (Q4_K, Q5_K), 16 of 16 (Q6_K)
  int32_t mins[4][kCols];    // Q4_K, Q5_K: mins of groups 2p (low 16 bits) and 2p + 1
  float d[kCols];
  float dmin[kCols];
};

// r[i] (16 dwords each) becomes column i of the 16 x 16 matrix whose rows they were.
void Transpose16(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  // v[g][c]: in 128-bit lane l, rows 4g..4g+3 of column 4l + c.
  __m512i v[4][4];
  for (int g = 0; g < 4; ++g) {
    v[g][0] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
    v[g][1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
    v[g][2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
    v[g][3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
  }
  for (int c = 0; c < 4; ++c) {
    const __m512i a = _mm512_shuffle_i32x4(v[0][c], v[1][c], 0x44);
    const __m512i b = _mm512_shuffle_i32x4(v[0][c], v[1][c], 0xee);
    const __m512i e = _mm512_shuffle_i32x4(v[2][c], v[3][c], 0x44);
    const __m512i f = _mm512_shuffle_i32x4(v[2][c], v[3][c], 0xee);
    r[c] = _mm512_shuffle_i32x4(a, e, 0x88);
    r[4 + c] = _mm512_shuffle_i32x4(a, e, 0xdd);
    r[8 + c] = _mm512_shuffle_i32x4(b, f, 0x88);
    r[12 + c] = _mm512_shuffle_i32x4(b, f, 0xdd);
  }
}

// Rows j..j+15 of W, every block, into panels[0, blocks).
template <DType kType>
void Unpack(const GemmArgs& a, int64_t j, int64_t blocks, Panel* panels) {
  constexpr size_t kBytes = kType == DType::kQ4_K ? 144 : kType == DType::kQ5_K ? 176 : 210;
  KBlockParts parts[kCols];
  for (int64_t b = 0; b < blocks; ++b) {
    Panel* p = panels + b;
    for (int c = 0; c < kCols; ++c) {
      KBlockParts& u = parts[c];
      UnpackKBlock<kType>(a.w + (j + c) * a.w_row_bytes + b * kBytes, &u);
      p->d[c] = u.d;
      p->dmin[c] = u.dmin;
      for (int g = 0; g < 16; ++g) p->scale[g][c] = u.scale[g];
      for (int pair = 0; pair < 4; ++pair) {
        p->mins[pair][c] = u.min[2 * pair] | (u.min[2 * pair + 1] << 16);
      }
    }
    for (int s = 0; s < 4; ++s) {
      __m512i r[kCols];
      for (int c = 0; c < kCols; ++c) r[c] = _mm512_loadu_si512(parts[c].q + 64 * s);
      Transpose16(r);
      for (int t = 0; t < kCols; ++t) _mm512_store_si512(p->q[16 * s + t], r[t]);
    }
  }
}

int32_t Bytes4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// y[i + r, j..j+15] for R rows of x from the panels.
template <int R, DType kType>
void Rows(const GemmArgs& a, const Panel* panels, int64_t blocks, int64_t i, int64_t j) {
  const Q8KBlock* x[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) x[r] = a.xq + (i + r) * a.xq_stride;
  // AddBlockK's lanes: block b into accd[r][b % 4] and accm[r][b % 4].
  __m512 accd[R][4], accm[R][4];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int l = 0; l < 4; ++l) accd[r][l] = accm[r][l] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < blocks; ++b) {
    const Panel& p = panels[b];
    __m512i sumi[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) sumi[r] = _mm512_setzero_si512();
    constexpr int kGroups = kType == DType::kQ6_K ? 16 : 8;
    constexpr int kSteps = 64 / kGroups;  // 4-value steps per group
#pragma GCC unroll 16
    for (int g = 0; g < kGroups; ++g) {
      __m512i dot[R];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) dot[r] = _mm512_setzero_si512();
#pragma GCC unroll 16
      for (int t = 0; t < kSteps; ++t) {
        const __m512i w = _mm512_load_si512(p.q[kSteps * g + t]);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          const __m512i xv = _mm512_set1_epi32(Bytes4(x[r][b].qs + 4 * (kSteps * g + t)));
          dot[r] = _mm512_dpbusd_epi32(dot[r], w, xv);
        }
      }
      const __m512i scale = _mm512_load_si512(p.scale[g]);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        if constexpr (kType == DType::kQ6_K) {
          // The quants are q + 32: 32 times the group's activation sum comes off.
          dot[r] = _mm512_sub_epi32(dot[r], _mm512_set1_epi32(32 * x[r][b].bsums[g]));
        }
        sumi[r] = _mm512_add_epi32(sumi[r], _mm512_mullo_epi32(dot[r], scale));
      }
    }
    const __m512 d = _mm512_load_ps(p.d);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const Q8KBlock& qx = x[r][b];
      const __m512 dx = _mm512_set1_ps(qx.d);
      __m512& sd = accd[r][b % 4];
      sd = _mm512_fmadd_ps(_mm512_mul_ps(d, dx), _mm512_cvtepi32_ps(sumi[r]), sd);
      if constexpr (kType != DType::kQ6_K) {
        __m512i mins = _mm512_setzero_si512();
#pragma GCC unroll 16
        for (int pair = 0; pair < 4; ++pair) {
          // The activation sums of groups 2 pair and 2 pair + 1 (of 32 each) as two int16.
          const int s0 = qx.bsums[4 * pair] + qx.bsums[4 * pair + 1];
          const int s1 = qx.bsums[4 * pair + 2] + qx.bsums[4 * pair + 3];
          const __m512i sums = _mm512_set1_epi32((s0 & 0xffff) | (s1 << 16));
          mins = _mm512_dpwssd_epi32(mins, _mm512_load_si512(p.mins[pair]), sums);
        }
        __m512& sm = accm[r][b % 4];
        sm = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_load_ps(p.dmin), dx), _mm512_cvtepi32_ps(mins),
                             sm);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    const __m512* sd = accd[r];
    const __m512* sm = accm[r];
    __m512 v =
        _mm512_sub_ps(_mm512_add_ps(_mm512_add_ps(sd[0], sd[2]), _mm512_add_ps(sd[1], sd[3])),
                      _mm512_add_ps(_mm512_add_ps(sm[0], sm[2]), _mm512_add_ps(sm[1], sm[3])));
    if (a.bias != nullptr) v = _mm512_add_ps(v, _mm512_loadu_ps(a.bias + j));
    _mm512_storeu_ps(a.y + (i + r) * a.y_stride + j, v);
  }
}

template <DType kType>
void Tile(const GemmArgs& a, int64_t j) {
  const int64_t blocks = a.k / kQ8KBlock;
  auto* panels = reinterpret_cast<Panel*>(
      ThreadScratch(static_cast<size_t>(blocks) * sizeof(Panel) / sizeof(float)));
  Unpack<kType>(a, j, blocks, panels);
  ForRowGroups<4>(a.m, [&](auto rows, int64_t i) {
    Rows<decltype(rows)::value, kType>(a, panels, blocks, i, j);
  });
}

// One 32-value block of 16 rows of W.
struct alignas(64) Panel32 {
  uint8_t q[8][kCols][4];  // q[t][c]: values 4t..4t+3 of column c, unsigned
  float d[kCols];
  float m[kCols];  // Q4_1, Q5_1: the minimum
};

template <DType kType>
constexpr int kLegacyOffset = kType == DType::kQ4_0   ? 8
                              : kType == DType::kQ5_0 ? 16
                              : kType == DType::kQ8_0 ? 128
                                                      : 0;

// Rows j..j+15 of W, every block, into panels[0, blocks) (blocks even: two blocks' 8
// dwords per column make one transpose).
template <DType kType>
void Unpack32(const GemmArgs& a, int64_t j, int64_t blocks, Panel32* panels) {
  constexpr size_t kBytes = LayoutOf(kType).bytes;
  constexpr bool kMin = kType == DType::kQ4_1 || kType == DType::kQ5_1;
  alignas(64) uint8_t bytes[kCols][64];
  for (int64_t b = 0; b < blocks; b += 2) {
    for (int c = 0; c < kCols; ++c) {
      for (int h = 0; h < 2; ++h) {
        Panel32* p = panels + b + h;
        if (b + h == blocks) {  // the padding block of an odd count: never read
          _mm256_store_si256(reinterpret_cast<__m256i*>(bytes[c] + 32 * h), _mm256_setzero_si256());
          continue;
        }
        const uint8_t* blk = a.w + (j + c) * a.w_row_bytes + (b + h) * kBytes;
        p->d[c] = Half(blk);
        p->m[c] = kMin ? Half(blk + 2) : 0.0f;
        __m256i q = LegacyBytes<kType>(blk);
        if constexpr (kType == DType::kQ8_0) q = _mm256_xor_si256(q, _mm256_set1_epi8(-128));
        _mm256_store_si256(reinterpret_cast<__m256i*>(bytes[c] + 32 * h), q);
      }
    }
    __m512i r[kCols];
    for (int c = 0; c < kCols; ++c) r[c] = _mm512_load_si512(bytes[c]);
    Transpose16(r);
    for (int t = 0; t < kCols; ++t) _mm512_store_si512(panels[b + t / 8].q[t % 8], r[t]);
  }
}

// y[i + r, j..j+15] for R rows of x from the panels, in FinishLanes8's order.
template <int R, DType kType>
void Rows32(const GemmArgs& a, const Panel32* panels, int64_t blocks, int64_t i, int64_t j) {
  constexpr bool kMin = kType == DType::kQ4_1 || kType == DType::kQ5_1;
  const Q8Block32* x[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) x[r] = a.xq32 + (i + r) * a.xq_stride;
  __m512 lanes[R][8];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (__m512& l : lanes[r]) l = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < blocks; ++b) {
    const Panel32& p = panels[b];
    __m512i dot[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      dot[r] = _mm512_set1_epi32(-kLegacyOffset<kType> * x[r][b].sum);
    }
#pragma GCC unroll 16
    for (int t = 0; t < 8; ++t) {
      const __m512i w = _mm512_load_si512(p.q[t]);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        dot[r] = _mm512_dpbusd_epi32(dot[r], w, _mm512_set1_epi32(Bytes4(x[r][b].qs + 4 * t)));
      }
    }
    const __m512 d = _mm512_load_ps(p.d);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      __m512& l = lanes[r][b % 8];
      l = _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(x[r][b].d)), _mm512_cvtepi32_ps(dot[r]),
                          l);
      if constexpr (kMin) l = _mm512_fmadd_ps(_mm512_load_ps(p.m), _mm512_set1_ps(x[r][b].s), l);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    const __m512* l = lanes[r];
    __m512 v = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(l[0], l[4]), _mm512_add_ps(l[2], l[6])),
                             _mm512_add_ps(_mm512_add_ps(l[1], l[5]), _mm512_add_ps(l[3], l[7])));
    if (a.bias != nullptr) v = _mm512_add_ps(v, _mm512_loadu_ps(a.bias + j));
    _mm512_storeu_ps(a.y + (i + r) * a.y_stride + j, v);
  }
}

template <DType kType>
void Tile32(const GemmArgs& a, int64_t j) {
  const int64_t blocks = a.k / kQ8Block32;
  const int64_t padded = (blocks + 1) / 2 * 2;
  auto* panels = reinterpret_cast<Panel32*>(
      ThreadScratch(static_cast<size_t>(padded) * sizeof(Panel32) / sizeof(float)));
  Unpack32<kType>(a, j, blocks, panels);
  ForRowGroups<2>(a.m, [&](auto rows, int64_t i) {
    Rows32<decltype(rows)::value, kType>(a, panels, blocks, i, j);
  });
}

}  // namespace

void TileQ8KAvx512Vnni(const GemmArgs& a, int64_t j) {
  switch (a.dtype) {
    case DType::kQ4_K:
      return Tile<DType::kQ4_K>(a, j);
    case DType::kQ5_K:
      return Tile<DType::kQ5_K>(a, j);
    case DType::kQ6_K:
      return Tile<DType::kQ6_K>(a, j);
    case DType::kQ8_0:
      return Tile32<DType::kQ8_0>(a, j);
    case DType::kQ4_0:
      return Tile32<DType::kQ4_0>(a, j);
    case DType::kQ5_0:
      return Tile32<DType::kQ5_0>(a, j);
    case DType::kQ4_1:
      return Tile32<DType::kQ4_1>(a, j);
    case DType::kQ5_1:
      return Tile32<DType::kQ5_1>(a, j);
    default:
      BATON_CHECK(false && "TileQ8KAvx512Vnni takes the types with an int8 product");
  }
}

}  // namespace baton::cpu::internal
