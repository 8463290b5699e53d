// Helpers shared by the SIMD files of the int8 products (quant_dot_<isa>.cc), which are
// compiled with AVX2 and F16C at least. Internal linkage: one copy per including file
// (matmul_internal.h says why).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/quant_dot.h"
#include "kernels/cpu/quant_dot_inl.h"

namespace baton::cpu::internal {
namespace {  // NOLINT(google-build-namespaces): one copy per including file is the point.

inline float Half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

inline __m256i Load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// Bit `from` of every byte of v at bit 4 (other bits garbage; the caller masks).
inline __m256i BitTo4(__m256i v, int from) {
  if (from < 4) return _mm256_slli_epi16(v, 4 - from);
  if (from > 4) return _mm256_srli_epi16(v, from - 4);
  return v;
}

// The 6-bit scales and mins of a Q4_K/Q5_K block (12 packed bytes) as 8 + 8 bytes, in
// out[0..1] and out[2..3] (ScaleMinK4 for every j at once).
inline void UnpackScales(const uint8_t* packed, uint32_t out[4]) {
  constexpr uint32_t kLow6 = 0x3f3f3f3f, kLow4 = 0x0f0f0f0f, kLow2 = 0x03030303;
  uint32_t u[3];
  std::memcpy(u, packed, 12);
  out[0] = u[0] & kLow6;
  out[1] = (u[2] & kLow4) | (((u[0] >> 6) & kLow2) << 4);
  out[2] = u[1] & kLow6;
  out[3] = ((u[2] >> 4) & kLow4) | (((u[1] >> 6) & kLow2) << 4);
}

// The scales and mins of UnpackScales widened to 16 lanes of 16 bits: scales in lanes
// 0-7, mins in lanes 8-15.
inline __m256i ScalesAndMins(const uint8_t* packed) {
  uint32_t u[4];
  UnpackScales(packed, u);
  return _mm256_cvtepu8_epi16(_mm_setr_epi32(static_cast<int>(u[0]), static_cast<int>(u[1]),
                                             static_cast<int>(u[2]), static_cast<int>(u[3])));
}

// The 64 quants of group pair p (groups 2p and 2p + 1) of a Q4_K/Q5_K block, 0-15 or 0-31:
// low nibbles (group 2p) in *lo, high nibbles in *hi; Q5_K's fifth bit is bit 2p or 2p + 1
// of the 32 qh bytes in `high`.
template <bool kFive>
inline void PairQuants(const uint8_t* qs, __m256i high, int p, __m256i* lo, __m256i* hi) {
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  const __m256i bits = Load(qs + 32 * p);
  *lo = _mm256_and_si256(bits, nibble);
  *hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), nibble);
  if constexpr (kFive) {
    const __m256i bit = _mm256_set1_epi8(0x10);
    *lo = _mm256_or_si256(*lo, _mm256_and_si256(BitTo4(high, 2 * p), bit));
    *hi = _mm256_or_si256(*hi, _mm256_and_si256(BitTo4(high, 2 * p + 1), bit));
  }
}

// Four blocks' integer sums, each spread over the lanes of v[t], as one vector of four in
// block order (exact: integer adds).
inline __m128i Sums4x8(const __m256i v[4]) {
  const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
  return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

inline __m128i Sums4x4(const __m128i v[4]) {
  return _mm_hadd_epi32(_mm_hadd_epi32(v[0], v[1]), _mm_hadd_epi32(v[2], v[3]));
}

// The mins' part of a Q4_K/Q5_K block against one Q8K block in 4 lanes, whose sum is the
// sum over groups of min * (the group's sum of 32, from the sums of 16).
inline __m128i MinsLanes(__m128i mins, const Q8KBlock& x) {
  const __m256i bsums = Load(x.bsums);
  const __m128i group =
      _mm_hadd_epi16(_mm256_castsi256_si128(bsums), _mm256_extracti128_si256(bsums, 1));
  return _mm_madd_epi16(mins, group);
}

// The blocks of a row go four at a time (AddBlockK's lanes): each block's integer sums
// left in lanes, the four blocks' sums reduced together (Sums4x*), and one multiply-add
// per set of running sums for the four.
constexpr int kBatch = 4;

// Running sums of one row (AddBlockK's d and m lanes, in two registers).
struct KAcc {
  __m128 d = _mm_setzero_ps();
  __m128 m = _mm_setzero_ps();
};

// Blocks b0 + t (t < 4, b0 a multiple of 4) of one row, block t in lane t: the activation
// scale dx, the weight's d and dmin (zero past the row's last block), the integer sums.
inline void AddBlocksK(KAcc* acc, __m128 dx, __m128 d, __m128 dmin, __m128i sumi, __m128i summins) {
  acc->d = _mm_fmadd_ps(_mm_mul_ps(dx, d), _mm_cvtepi32_ps(sumi), acc->d);
  acc->m = _mm_fmadd_ps(_mm_mul_ps(dx, dmin), _mm_cvtepi32_ps(summins), acc->m);
}

// Four scalars as a vector, element by element (a 16-byte load of four 4-byte stores
// would stall on store forwarding).
inline __m128 Four(const float* v) { return _mm_setr_ps(v[0], v[1], v[2], v[3]); }

inline float FinishK(const KAcc& acc) {
  alignas(16) float d[4], m[4];
  _mm_store_ps(d, acc.d);
  _mm_store_ps(m, acc.m);
  return FinishK(d, m);
}

// One weight row of a K-quant times R Q8K rows, four blocks at a time (AddBlockK's lanes).
// block(b, &d, &dmin, sums, mins) decodes block b: its d and dmin (Q6_K: 0) and, for each
// row r, the block's integer products in the 8 lanes of sums[r] and the mins' part in the
// 4 lanes of mins[r] (zero for Q6_K). Each block's lanes are reduced with the other three
// blocks' (Sums4x*), and the row's running sums take one multiply-add per set for the
// four.
template <int R, typename Block>
inline void RowsByFour(const Q8KBlock* const* x, int64_t blocks, Block&& block, float* out) {
  KAcc acc[R];
  for (int64_t b0 = 0; b0 < blocks; b0 += kBatch) {
    const int n = static_cast<int>(std::min<int64_t>(kBatch, blocks - b0));
    __m256i sums[kBatch][R];
    __m128i mins[kBatch][R];
    float d[kBatch] = {}, dmin[kBatch] = {}, dx[R][kBatch] = {};
#pragma GCC unroll 4
    for (int t = 0; t < kBatch; ++t) {
      if (t >= n) {
        for (int r = 0; r < R; ++r) {
          sums[t][r] = _mm256_setzero_si256();
          mins[t][r] = _mm_setzero_si128();
        }
        continue;
      }
      block(b0 + t, &d[t], &dmin[t], sums[t], mins[t]);
      for (int r = 0; r < R; ++r) dx[r][t] = x[r][b0 + t].d;
    }
    for (int r = 0; r < R; ++r) {
      const __m256i s[kBatch] = {sums[0][r], sums[1][r], sums[2][r], sums[3][r]};
      const __m128i m[kBatch] = {mins[0][r], mins[1][r], mins[2][r], mins[3][r]};
      AddBlocksK(&acc[r], Four(dx[r]), Four(d), Four(dmin), Sums4x8(s), Sums4x4(m));
    }
  }
  for (int r = 0; r < R; ++r) out[r] = FinishK(acc[r]);
}

// The 128 quants of half h of a Q6_K block as unsigned bytes (q + 32, 0-63), 32 per part:
// part p's low nibble from ql (bytes 0-31 or 32-63, low or high half), top two bits from
// bits 2p of the half's 32 qh bytes.
inline void Q6HalfQuants(const uint8_t* blk, int h, __m256i q[4]) {
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  const __m256i top_bits = _mm256_set1_epi8(0x30);
  const __m256i l0 = Load(blk + 64 * h);
  const __m256i l1 = Load(blk + 64 * h + 32);
  const __m256i top = Load(blk + 128 + 32 * h);
  q[0] = _mm256_and_si256(l0, nibble);
  q[1] = _mm256_and_si256(l1, nibble);
  q[2] = _mm256_and_si256(_mm256_srli_epi16(l0, 4), nibble);
  q[3] = _mm256_and_si256(_mm256_srli_epi16(l1, 4), nibble);
  for (int part = 0; part < 4; ++part) {
    // Bits 2p and 2p + 1 of each byte moved to bits 4 and 5 (what crosses a byte is masked).
    q[part] = _mm256_or_si256(q[part], _mm256_and_si256(BitTo4(top, 2 * part), top_bits));
  }
}

// A K-quant block laid out for the tiled kernels: d and dmin (Q6_K: 0), the group scales
// (Q4_K/Q5_K 8 of 6 bits, Q6_K 16 signed), the 8 mins (Q6_K none), and the 256 quants in
// element order as unsigned bytes (Q6_K's q + 32, 0-63).
struct KBlockParts {
  float d = 0, dmin = 0;
  int32_t scale[16] = {};
  int32_t min[8] = {};
  alignas(32) uint8_t q[256];
};

template <DType kType>
inline void UnpackKBlock(const uint8_t* blk, KBlockParts* out) {
  if constexpr (kType == DType::kQ6_K) {
    out->d = Half(blk + 208);
    out->dmin = 0;
    for (int g = 0; g < 16; ++g) out->scale[g] = static_cast<int8_t>(blk[192 + g]);
    for (int h = 0; h < 2; ++h) {
      __m256i q[4];
      Q6HalfQuants(blk, h, q);
      for (int part = 0; part < 4; ++part) {
        _mm256_store_si256(reinterpret_cast<__m256i*>(out->q + 128 * h + 32 * part), q[part]);
      }
    }
  } else {
    constexpr bool kFive = kType == DType::kQ5_K;
    out->d = Half(blk);
    out->dmin = Half(blk + 2);
    uint32_t u[4];
    UnpackScales(blk + 4, u);
    uint8_t sm[16];
    std::memcpy(sm, u, 16);  // scales in bytes 0-7, mins in 8-15
    for (int g = 0; g < 8; ++g) {
      out->scale[g] = sm[g];
      out->min[g] = sm[8 + g];
    }
    const uint8_t* qs = blk + (kFive ? 48 : 16);
    const __m256i high = kFive ? Load(blk + 16) : _mm256_setzero_si256();
    for (int pair = 0; pair < 4; ++pair) {
      __m256i lo, hi;
      PairQuants<kFive>(qs, high, pair, &lo, &hi);
      _mm256_store_si256(reinterpret_cast<__m256i*>(out->q + 64 * pair), lo);
      _mm256_store_si256(reinterpret_cast<__m256i*>(out->q + 64 * pair + 32), hi);
    }
  }
}

// 32 bits as 32 bytes: byte j is 0xff where bit j is set.
inline __m256i BitsToBytes(uint32_t bits) {
  // Byte j of the broadcast word that holds bit j, then every other bit of it forced on:
  // the byte is all ones exactly when bit j was.
  const __m256i which =
      _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303);
  const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)), which);
  const __m256i others = _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe);
  return _mm256_cmpeq_epi8(_mm256_or_si256(bytes, others), _mm256_set1_epi8(-1));
}

// Where the packed nibbles (qs) and Q5's fifth bits (qh) start in a 32-value block: after
// the f16 d, the f16 m of Q4_1/Q5_1, and qh.
constexpr int LegacyQhAt(DType t) { return t == DType::kQ5_0 ? 2 : 4; }
constexpr int LegacyQsAt(DType t) {
  return t == DType::kQ4_0 ? 2 : t == DType::kQ4_1 ? 4 : t == DType::kQ5_0 ? 6 : 8;
}

// A 32-value weight block's quants as 32 bytes in element order: unsigned (Q4_x, Q5_x;
// the offset of Q4_0/Q5_0 comes off through the activations' sum) or Q8_0's signed bytes.
template <DType kType>
inline __m256i LegacyBytes(const uint8_t* b) {
  if constexpr (kType == DType::kQ8_0) return Load(b + 2);
  constexpr int kQs = LegacyQsAt(kType);
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + kQs));
  const __m128i nibble = _mm_set1_epi8(0x0f);
  __m256i q = _mm256_setr_m128i(_mm_and_si128(packed, nibble),
                                _mm_and_si128(_mm_srli_epi16(packed, 4), nibble));
  if constexpr (kType == DType::kQ5_0 || kType == DType::kQ5_1) {
    uint32_t qh;
    std::memcpy(&qh, b + LegacyQhAt(kType), 4);
#if defined(__AVX512BW__) && defined(__AVX512VL__)
    // The bits as a byte mask: 16 added where they are set.
    q = _mm256_mask_add_epi8(q, _cvtu32_mask32(qh), q, _mm256_set1_epi8(0x10));
#else
    q = _mm256_or_si256(q, _mm256_and_si256(BitsToBytes(qh), _mm256_set1_epi8(0x10)));
#endif
  }
  return q;
}

#if defined(__AVX512BW__) && defined(__AVX512VL__)
// Two 32-value weight blocks' quants as LegacyBytes: block b0 in bytes 0-31, b1 in 32-63.
template <DType kType>
inline __m512i LegacyPair(const uint8_t* b0, const uint8_t* b1) {
  if constexpr (kType == DType::kQ8_0) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(Load(b0 + 2)), Load(b1 + 2), 1);
  }
  constexpr int kQs = LegacyQsAt(kType);
  const __m256i packed =
      _mm256_setr_m128i(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b0 + kQs)),
                        _mm_loadu_si128(reinterpret_cast<const __m128i*>(b1 + kQs)));
  // 128-bit lanes [b0, b0, b1, b1], then the low nibbles of lanes 0 and 2 and the high ones
  // of lanes 1 and 3.
  const __m512i wide = _mm512_castsi256_si512(packed);
  const __m512i both = _mm512_shuffle_i64x2(wide, wide, 0x50);
  const __m512i shift = _mm512_setr_epi64(0, 0, 0x0004000400040004, 0x0004000400040004, 0, 0,
                                          0x0004000400040004, 0x0004000400040004);
  __m512i q = _mm512_and_si512(_mm512_srlv_epi16(both, shift), _mm512_set1_epi8(0x0f));
  if constexpr (kType == DType::kQ5_0 || kType == DType::kQ5_1) {
    uint32_t h0, h1;
    std::memcpy(&h0, b0 + LegacyQhAt(kType), 4);
    std::memcpy(&h1, b1 + LegacyQhAt(kType), 4);
    const uint64_t bits = h0 | (static_cast<uint64_t>(h1) << 32);
    q = _mm512_mask_add_epi8(q, _cvtu64_mask64(bits), q, _mm512_set1_epi8(0x10));
  }
  return q;
}

// Four registers of two blocks' 8 int32 lanes each (block 2p in lanes 0-7 of v[p], block
// 2p + 1 in lanes 8-15) to the 8 blocks' sums in order (exact).
[[gnu::always_inline]] inline __m256i Sums8x2x8(const __m512i v[4]) {
  // 128-bit lane i of lo4: block i's lanes 0-3 plus its lanes 4-7; of hi4: block 4 + i's.
  const __m512i lo4 = _mm512_add_epi32(_mm512_shuffle_i64x2(v[0], v[1], 0x88),
                                       _mm512_shuffle_i64x2(v[0], v[1], 0xdd));
  const __m512i hi4 = _mm512_add_epi32(_mm512_shuffle_i64x2(v[2], v[3], 0x88),
                                       _mm512_shuffle_i64x2(v[2], v[3], 0xdd));
  // Per 128-bit lane i: [a0 + a2, b0 + b2, a1 + a3, b1 + b3] (a: block i, b: block 4 + i),
  // then the two a's and the two b's added: block i in element 0, block 4 + i in 1.
  const __m512i p =
      _mm512_add_epi32(_mm512_unpacklo_epi32(lo4, hi4), _mm512_unpackhi_epi32(lo4, hi4));
  const __m512i s = _mm512_add_epi32(p, _mm512_shuffle_epi32(p, _MM_PERM_BADC));
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_castsi512_si256(_mm512_permutexvar_epi32(order, s));
}
#endif

// Lanes t < n all ones, the rest zero (16 or 32 bits each).
[[gnu::always_inline]] inline __m128i First16(int n) {
  return _mm_cmpgt_epi16(_mm_set1_epi16(static_cast<int16_t>(n)),
                         _mm_setr_epi16(0, 1, 2, 3, 4, 5, 6, 7));
}

[[gnu::always_inline]] inline __m256 First32(int n) {
  return _mm256_castsi256_ps(
      _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
}

// The f16 at byte `at` of blocks 0..n-1 (kBytes apart), zeros past them, as f32 lanes.
// Element by element from the blocks (lanes past n read block 0, then masked): a gather is
// slow on AMD, and scalars stored to the stack and read back as one vector would stall on
// store forwarding.
template <int kBytes>
[[gnu::always_inline]] inline __m256 BlockHalves(const uint8_t* first, int at, int n) {
  auto half = [&](int t) {
    int16_t v;
    std::memcpy(&v, first + (t < n ? t : 0) * kBytes + at, 2);
    return v;
  };
  __m128i v =
      _mm_setr_epi16(half(0), half(1), half(2), half(3), half(4), half(5), half(6), half(7));
  if (n < 8) v = _mm_and_si128(v, First16(n));
  return _mm256_cvtph_ps(v);
}

// x[0..n-1].d (or .s), zeros past them; as BlockHalves.
template <bool kS>
[[gnu::always_inline]] inline __m256 EightScales(const Q8Block32* x, int n) {
  auto at = [&](int t) { return kS ? x[t < n ? t : 0].s : x[t < n ? t : 0].d; };
  const __m256 v = _mm256_setr_ps(at(0), at(1), at(2), at(3), at(4), at(5), at(6), at(7));
  return n < 8 ? _mm256_and_ps(v, First32(n)) : v;
}

// x[0..n-1].sum, zeros past them; as EightScales.
[[gnu::always_inline]] inline __m256i EightSums(const Q8Block32* x, int n) {
  auto at = [&](int t) { return x[t < n ? t : 0].sum; };
  const __m256i v = _mm256_setr_epi32(at(0), at(1), at(2), at(3), at(4), at(5), at(6), at(7));
  return n < 8 ? _mm256_and_si256(v, _mm256_castps_si256(First32(n))) : v;
}

// 8 blocks' sums, in order (exact), from p[i] = vphaddd of blocks 2i and 2i + 1's 8 int32
// lanes each.
[[gnu::always_inline]] inline __m256i Sums8x4Pairs(const __m256i p[4]) {
  // Per 128-bit half: the sums of lanes 0-3 (low half) or 4-7 (high half) of blocks 0-3.
  const __m256i a = _mm256_hadd_epi32(p[0], p[1]);
  const __m256i b = _mm256_hadd_epi32(p[2], p[3]);
  return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20),
                          _mm256_permute2x128_si256(a, b, 0x31));
}

// Blocks i0..i0+n-1 (n <= 8) of `row` times the same blocks of each x[r]: each block's
// integer sum of quant times activation (before any offset), block t in lane t of sumi[r].
// Files compiled for AVX-512 (BW/VL) put two blocks in a register; integer sums are exact,
// so both give the same totals.
template <DType kType, int R>
[[gnu::always_inline]] inline void LegacySums8(const uint8_t* row, const Q8Block32* const* x,
                                               int64_t i0, int n, __m256i sumi[R]) {
  constexpr int kBytes = LayoutOf(kType).bytes;
#if defined(__AVX512BW__) && defined(__AVX512VL__)
  // Two blocks per register: block 2p in bytes 0-31, block 2p + 1 in bytes 32-63.
  const __m512i ones = _mm512_set1_epi16(1);
  __m512i s[R][4];
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) {
    const int t = 2 * p;
    if (t >= n) {
      for (int r = 0; r < R; ++r) s[r][p] = _mm512_setzero_si512();
      continue;
    }
    const bool second = t + 1 < n;
    const uint8_t* b = row + (i0 + t) * kBytes;
    const __m512i q = LegacyPair<kType>(b, second ? b + kBytes : b);
    // vpmaddubsw takes unsigned x signed: Q8_0's signed weights go in as |w| with the
    // activations negated where w < 0.
    const __m512i uq = kType == DType::kQ8_0 ? _mm512_abs_epi8(q) : q;
    for (int r = 0; r < R; ++r) {
      const __m256i y1 = second ? Load(x[r][i0 + t + 1].qs) : _mm256_setzero_si256();
      __m512i y = _mm512_inserti64x4(_mm512_castsi256_si512(Load(x[r][i0 + t].qs)), y1, 1);
      if constexpr (kType == DType::kQ8_0) {
        y = _mm512_mask_sub_epi8(y, _mm512_movepi8_mask(q), _mm512_setzero_si512(), y);
      }
      s[r][p] = _mm512_madd_epi16(_mm512_maddubs_epi16(uq, y), ones);
    }
  }
  for (int r = 0; r < R; ++r) sumi[r] = Sums8x2x8(s[r]);
#else
  const __m256i ones = _mm256_set1_epi16(1);
  // Each pair of blocks' lanes added pairwise (vphaddd) as soon as both are done, so fewer
  // registers stay live; Sums8x4Pairs finishes the eight sums.
  __m256i pairs[R][4];
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) {
    __m256i s[2][R];
#pragma GCC unroll 2
    for (int e = 0; e < 2; ++e) {
      const int t = 2 * p + e;
      if (t >= n) {
        for (int r = 0; r < R; ++r) s[e][r] = _mm256_setzero_si256();
        continue;
      }
      const uint8_t* b = row + (i0 + t) * kBytes;
      const __m256i q = LegacyBytes<kType>(b);
      // vpmaddubsw takes unsigned x signed: Q8_0's signed weights go in as |w| with their
      // signs moved onto the activations.
      const __m256i uq = kType == DType::kQ8_0 ? _mm256_sign_epi8(q, q) : q;
      for (int r = 0; r < R; ++r) {
        __m256i y = Load(x[r][i0 + t].qs);
        if constexpr (kType == DType::kQ8_0) y = _mm256_sign_epi8(y, q);
        s[e][r] = _mm256_madd_epi16(_mm256_maddubs_epi16(uq, y), ones);
      }
    }
    for (int r = 0; r < R; ++r) pairs[r][p] = _mm256_hadd_epi32(s[0][r], s[1][r]);
  }
  for (int r = 0; r < R; ++r) sumi[r] = Sums8x4Pairs(pairs[r]);
#endif
}

// Eight blocks at a time: each block's integer sum in a lane (LegacySums8), and one
// multiply-add per (weight row, row of x) for the eight (FinishLanes8's order). W weight
// rows (row, row + row_bytes, ...) share the activations' scales and sums (decode takes
// two at a time); out[w * R + r].
template <DType kType, int R, int W = 1>
void RowsLegacy(const uint8_t* row, size_t row_bytes, const Q8Block32* const* x, int64_t blocks,
                float* out) {
  constexpr int kBytes = LayoutOf(kType).bytes;
  constexpr int kOffset = kType == DType::kQ4_0 ? 8 : kType == DType::kQ5_0 ? 16 : 0;
  constexpr int kOffsetShift = kOffset == 8 ? 3 : 4;
  constexpr bool kMin = kType == DType::kQ4_1 || kType == DType::kQ5_1;
  __m256 acc[W][R];
  for (int w = 0; w < W; ++w) {
    for (int r = 0; r < R; ++r) acc[w][r] = _mm256_setzero_ps();
  }
  for (int64_t i0 = 0; i0 < blocks; i0 += 8) {
    const int n = static_cast<int>(std::min<int64_t>(8, blocks - i0));
    __m256i block_sums[W][R];
    __m256 dw[W];
#pragma GCC unroll 2
    for (int w = 0; w < W; ++w) {
      LegacySums8<kType, R>(row + w * row_bytes, x, i0, n, block_sums[w]);
      dw[w] = BlockHalves<kBytes>(row + w * row_bytes + i0 * kBytes, 0, n);
    }
    for (int r = 0; r < R; ++r) {
      const __m256 dx = EightScales<false>(x[r] + i0, n);
      // The unsigned quants' offset: kOffset times each block's activation sum.
      const __m256i offset = kOffset != 0 ? _mm256_slli_epi32(EightSums(x[r] + i0, n), kOffsetShift)
                                          : _mm256_setzero_si256();
#pragma GCC unroll 2
      for (int w = 0; w < W; ++w) {
        __m256i sumi = block_sums[w][r];
        if constexpr (kOffset != 0) sumi = _mm256_sub_epi32(sumi, offset);
        const __m256 sums = _mm256_cvtepi32_ps(sumi);
        acc[w][r] = _mm256_fmadd_ps(_mm256_mul_ps(dw[w], dx), sums, acc[w][r]);
        if constexpr (kMin) {
          acc[w][r] = _mm256_fmadd_ps(BlockHalves<kBytes>(row + w * row_bytes + i0 * kBytes, 2, n),
                                      EightScales<true>(x[r] + i0, n), acc[w][r]);
        }
      }
    }
  }
  for (int w = 0; w < W; ++w) {
    for (int r = 0; r < R; ++r) {
      alignas(32) float lanes[8];
      _mm256_store_ps(lanes, acc[w][r]);
      out[w * R + r] = FinishLanes8(lanes);
    }
  }
}

// R rows of x times W weight rows of `dtype` (RowsLegacy).
template <int R, int W = 1>
void LegacyRows(DType dtype, const uint8_t* row, size_t row_bytes, const Q8Block32* const* x,
                int64_t blocks, float* out) {
  switch (dtype) {
    case DType::kQ8_0:
      return RowsLegacy<DType::kQ8_0, R, W>(row, row_bytes, x, blocks, out);
    case DType::kQ4_0:
      return RowsLegacy<DType::kQ4_0, R, W>(row, row_bytes, x, blocks, out);
    case DType::kQ4_1:
      return RowsLegacy<DType::kQ4_1, R, W>(row, row_bytes, x, blocks, out);
    case DType::kQ5_0:
      return RowsLegacy<DType::kQ5_0, R, W>(row, row_bytes, x, blocks, out);
    case DType::kQ5_1:
      return RowsLegacy<DType::kQ5_1, R, W>(row, row_bytes, x, blocks, out);
    default:
      for (int i = 0; i < R * W; ++i) out[i] = 0;
  }
}

// f(std::integral_constant<int, R>{}) for R = rows (1-4), so a kernel templated on its
// row count is called with a run-time one.
template <typename F>
inline void WithRows(int rows, F&& f) {
  switch (rows) {
    case 1:
      return f(std::integral_constant<int, 1>{});
    case 2:
      return f(std::integral_constant<int, 2>{});
    case 3:
      return f(std::integral_constant<int, 3>{});
    default:
      return f(std::integral_constant<int, 4>{});
  }
}

// f(std::integral_constant<int, R>{}, i) for the rows [i, i + R) of [0, m): groups of
// kRows (at most 4), then what is left in one call.
template <int kRows, typename F>
inline void ForRowGroups(int64_t m, F&& f) {
  int64_t i = 0;
  for (; i + kRows <= m; i += kRows) f(std::integral_constant<int, kRows>{}, i);
  if (i < m) WithRows(static_cast<int>(m - i), [&](auto r) { f(r, i); });
}

// One K-quant weight row times `rows` Q8K rows through Kernel<R, type>::Run, the file's
// kernels for R rows of x and one weight type.
template <template <int, DType> class Kernel>
inline void KQuantRows(DType dtype, const uint8_t* row, const Q8KBlock* const* x, int rows,
                       int64_t blocks, float* out) {
  WithRows(rows, [&](auto r) {
    constexpr int R = decltype(r)::value;
    switch (dtype) {
      case DType::kQ4_K:
        return Kernel<R, DType::kQ4_K>::Run(row, x, blocks, out);
      case DType::kQ5_K:
        return Kernel<R, DType::kQ5_K>::Run(row, x, blocks, out);
      case DType::kQ6_K:
        return Kernel<R, DType::kQ6_K>::Run(row, x, blocks, out);
      default:
        for (int i = 0; i < R; ++i) out[i] = 0;
    }
  });
}

}  // namespace
}  // namespace baton::cpu::internal
