// AttendQueries with AVX2 and FMA, for head_dim a multiple of 8, at most 256, over f32 or
// bf16 pages. Compiled with -mavx2 -mfma (isa_flags.cmake); attention.cc calls it when the
// CPU has AVX2 and the AVX-512 kernel does not apply (no AVX-512, or head_dim 8, 24, 40..).
//
// The design of attention_avx512.cc on 8 lanes. Per query, in three passes over its keys,
// always in key order from position 0:
//   1. scores: 8 keys at a time, each key's products accumulated over the head in 8 lanes,
//      then the 8 keys' vectors reduced by a fixed transpose-and-add tree in which each
//      key's score is the sum of its own vector alone;
//   2. exp(score - max) with the Cephes polynomial, and their sum in 8 lanes, key order,
//      then a fixed tree over the lanes;
//   3. the weighted sum of V rows, key by key.
// A query's result depends only on it, pos and the pages: not on other queries, on where a
// prefill chunk starts or on the thread. Queries that share a KV head may go through one
// pass together, each K tile and V row then loaded once for all of them; each query's
// arithmetic stays exactly as above.
//
// With 16 vector registers, the V pass keeps at most 8 accumulators: wider heads go
// through it in strips of 64 columns, each a walk over all keys. A column's sum is the
// same chain of FMAs in key order whatever strip it falls in.
//
// At head_dim 8 a key is 32 bytes and one FMA per pass, so walking the pages costs more
// than the arithmetic: the walkers advance by pointer increments, the 8 keys of a tile
// inside one page are addressed from its first row, and rows shorter than a cache line are
// prefetched once per line. None of this changes the arithmetic.
//
// Every kernel is a template on the pages' element type T: a bf16 row is widened to f32
// as it is loaded (zero-extended and shifted up by 16 bits, which is exact), and from there
// the arithmetic is the f32 path's.
#include "kernels/cpu/simd.h"

#include <array>
#include <cmath>
#include <cstdint>
#include <utility>

#include "kernels/cpu/attention_internal.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/exp_avx2_inl.h"

// Loops over a fixed count must be unrolled completely, or the accumulators and partial
// sums live on the stack (GCC at -O2 does not unroll them by itself).
#define ATTN_UNROLL _Pragma("GCC unroll 32")

namespace baton::cpu::internal {
namespace {

// r[j] = the sum of v[j]'s 8 lanes, for 8 vectors, by a fixed tree.
[[gnu::always_inline]] inline __m256 ReduceAdd8(const __m256 (&v)[8]) {
  __m256 a[4];
  ATTN_UNROLL
  for (int i = 0; i < 4; ++i) {  // per 128-bit half: [x0+x2, y0+y2, x1+x3, y1+y3]
    a[i] = _mm256_add_ps(_mm256_unpacklo_ps(v[2 * i], v[2 * i + 1]),
                         _mm256_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  }
  __m256 b[2];
  ATTN_UNROLL
  for (int i = 0; i < 2; ++i) {  // per 128-bit half: keys 4i..4i+3, partial over the half
    const __m256d x = _mm256_castps_pd(a[2 * i]), y = _mm256_castps_pd(a[2 * i + 1]);
    b[i] = _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(x, y)),
                         _mm256_castpd_ps(_mm256_unpackhi_pd(x, y)));
  }
  // Keys 0..3 from b[0]'s halves, keys 4..7 from b[1]'s.
  return _mm256_add_ps(_mm256_permute2f128_ps(b[0], b[1], 0x20),
                       _mm256_permute2f128_ps(b[0], b[1], 0x31));
}

// The sum of v's 8 lanes by a fixed tree: ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)).
[[gnu::always_inline]] inline float SumLanes(__m256 v) {
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

// The largest of v's 8 lanes.
[[gnu::always_inline]] inline float MaxLane(__m256 v) {
  const __m128 s4 = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_max_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_max_ss(s2, _mm_movehdup_ps(s2)));
}

// All-ones in the first `count` of 8 lanes (0 < count <= 8).
[[gnu::always_inline]] inline __m256i FirstLanes(int64_t count) {
  alignas(64) static constexpr int32_t kOnes[16] = {-1, -1, -1, -1, -1, -1, -1, -1};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kOnes + 8 - count));
}

// 8 elements of a K or V row as f32.
[[gnu::always_inline]] inline __m256 Load8(const float* p) { return _mm256_loadu_ps(p); }
[[gnu::always_inline]] inline __m256 Load8(const Bf16* p) {
  const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
}

// Walks the rows of one KV head in position order through the block table without a
// division per key. A block's table entry is read only when its first row is asked for.
template <typename T>
class RowWalker {
 public:
  RowWalker(const void* base, const int32_t* block_table, const PagedKvView& kv, int64_t kv_head)
      : base_(static_cast<const T*>(base) + kv_head * kv.head_stride),
        table_(block_table),
        block_stride_(kv.block_stride),
        block_size_(kv.block_size),
        row_stride_(kv.head_dim) {}
  // The current row; call once per position, then Next().
  const T* Row() {
    if (left_ == 0) {
      row_ = base_ + table_[block_++] * block_stride_;
      left_ = block_size_;
    }
    return row_;
  }
  void Next() {
    row_ += row_stride_;
    --left_;
  }
  // The current row if the `count` rows from it lie in one block, and then moves past
  // them; else null, and stays.
  const T* Rows(int64_t count) {
    const T* row = Row();
    if (left_ < count) return nullptr;
    row_ += count * row_stride_;
    left_ -= count;
    return row;
  }

 private:
  const T* base_;
  const int32_t* table_;
  int64_t block_stride_, block_size_, row_stride_;
  int64_t block_ = 0, left_ = 0;
  const T* row_ = nullptr;
};

// The hardware prefetchers lose the stream at each page (attention_avx512.cc explains),
// so each pass asks for the rows kPrefetchKeys positions ahead of the one it is on.
constexpr int64_t kPrefetchKeys = 16;

// Asks for the cache lines of kChunks * 8 elements of T from p, the row (or strip of a
// row) of position t. A page's rows are contiguous, so of rows shorter than a line only
// every few ask.
template <int kChunks, typename T>
void Prefetch(const T* p, int64_t t) {
  constexpr int kBytes = kChunks * 8 * static_cast<int>(sizeof(T));
  constexpr int kEvery = kBytes < 64 ? 64 / kBytes : 1;
  if (t % kEvery != 0) return;
  ATTN_UNROLL
  for (int i = 0; i < (kBytes + 63) / 64; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(p) + 64 * i, _MM_HINT_T0);
  }
}

// The sum of scores[0..n) in 8 lanes in key order and a fixed tree over the lanes, after
// replacing each score by exp(score - max).
float ExpAndSum(float* scores, int64_t n, float max) {
  const __m256 max_b = _mm256_set1_ps(max);
  __m256 sum_v = _mm256_setzero_ps();
  int64_t t = 0;
  for (; t + 8 <= n; t += 8) {
    const __m256 e = Exp(_mm256_sub_ps(_mm256_loadu_ps(scores + t), max_b));
    _mm256_storeu_ps(scores + t, e);
    sum_v = _mm256_add_ps(sum_v, e);
  }
  if (t < n) {
    const __m256i mask = FirstLanes(n - t);
    const __m256 e = Exp(_mm256_sub_ps(_mm256_maskload_ps(scores + t, mask), max_b));
    _mm256_maskstore_ps(scores + t, mask, e);
    sum_v = _mm256_add_ps(sum_v, _mm256_and_ps(e, _mm256_castsi256_ps(mask)));
  }
  return SumLanes(sum_v);
}

// out[i][col..col + 8 * kWidth) = inv[i] * sum over t of w[i][t] * V[t][col..], for
// kQueries queries whose weights are rows of n floats in `weights` and whose outputs are
// rows of head_dim floats in `out`.
template <typename T, int kWidth, int kQueries>
void WeightedValues(const int32_t* block_table, const PagedKvView& kv, int64_t kv_head,
                    const float* weights, int64_t n, int64_t col, const float (&inv)[kQueries],
                    float* out) {
  __m256 acc[kQueries][kWidth];
  ATTN_UNROLL
  for (int i = 0; i < kQueries; ++i) {
    ATTN_UNROLL
    for (int c = 0; c < kWidth; ++c) acc[i][c] = _mm256_setzero_ps();
  }
  RowWalker<T> values(kv.v, block_table, kv, kv_head);
  RowWalker<T> values_ahead(kv.v, block_table, kv, kv_head);
  for (int64_t t = 0; t < n && t < kPrefetchKeys; ++t, values_ahead.Next()) {
    Prefetch<kWidth>(values_ahead.Row() + col, t);
  }
  for (int64_t t = 0; t < n; ++t, values.Next()) {
    const T* value = values.Row() + col;
    if (t + kPrefetchKeys < n) {
      Prefetch<kWidth>(values_ahead.Row() + col, t + kPrefetchKeys);
      values_ahead.Next();
    }
    ATTN_UNROLL
    for (int c = 0; c < kWidth; ++c) {
      const __m256 v = Load8(value + 8 * c);
      ATTN_UNROLL
      for (int i = 0; i < kQueries; ++i) {
        acc[i][c] = _mm256_fmadd_ps(_mm256_broadcast_ss(weights + i * n + t), v, acc[i][c]);
      }
    }
  }
  ATTN_UNROLL
  for (int i = 0; i < kQueries; ++i) {
    const __m256 inv_v = _mm256_set1_ps(inv[i]);
    ATTN_UNROLL
    for (int c = 0; c < kWidth; ++c) {
      _mm256_storeu_ps(out + i * kv.head_dim + col + 8 * c, _mm256_mul_ps(acc[i][c], inv_v));
    }
  }
}

// The first `count` of a tile's 8 scores into row (one query's) and its running maximum.
[[gnu::always_inline]] inline void KeepScores(__m256 s, int64_t count, float* row, __m256& max_v) {
  if (count == 8) {
    _mm256_storeu_ps(row, s);
    max_v = _mm256_max_ps(max_v, s);
    return;
  }
  const __m256i mask = FirstLanes(count);
  _mm256_maskstore_ps(row, mask, s);
  max_v = _mm256_max_ps(max_v,
                        _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), s, _mm256_castsi256_ps(mask)));
}

// The scores of 8 keys, row_of(0..7), for kQueries queries into scores (rows of n
// floats), and the running maxima; only the first `count` lanes are kept.
template <typename T, int kChunks, int kQueries, typename RowOf>
[[gnu::always_inline]] inline void ScoreTile(const float* q, RowOf row_of, int64_t count,
                                             __m256 scale_v, float* scores, int64_t n,
                                             __m256 (&max_v)[kQueries]) {
  constexpr int64_t kDim = kChunks * 8;
  ATTN_UNROLL
  for (int i = 0; i < kQueries; ++i) {
    __m256 partial[8];
    ATTN_UNROLL
    for (int j = 0; j < 8; ++j) partial[j] = _mm256_setzero_ps();
    ATTN_UNROLL
    for (int c = 0; c < kChunks; ++c) {
      const __m256 qc = _mm256_loadu_ps(q + i * kDim + 8 * c);
      ATTN_UNROLL
      for (int j = 0; j < 8; ++j) {
        partial[j] = _mm256_fmadd_ps(qc, Load8(row_of(j) + 8 * c), partial[j]);
      }
    }
    KeepScores(_mm256_mul_ps(ReduceAdd8(partial), scale_v), count, scores + i * n, max_v[i]);
  }
}

// ScoreTile for heads of more than 32 dims and 2 to 4 queries: each chunk of a key is
// loaded (and widened) once for all the queries rather than once per query. The 8 keys go
// in sub-tiles of kKeys, whose kQueries x kKeys products vectors fit the registers; each
// score is still its own vector's FMA chain over the chunks, reduced by ReduceAdd8's tree
// (which sums each input vector alone, whatever sits beside it), so every score has
// ScoreTile's bits.
template <typename T, int kChunks, int kQueries, typename RowOf>
[[gnu::always_inline]] inline void ScoreTileShared(const float* q, RowOf row_of, int64_t count,
                                                   __m256 scale_v, float* scores, int64_t n,
                                                   __m256 (&max_v)[kQueries]) {
  static_assert(kQueries >= 2 && kQueries <= 4);
  constexpr int64_t kDim = kChunks * 8;
  constexpr int kKeys = kQueries == 2 ? 4 : 2;
  alignas(32) float tile[kQueries][8];
  ATTN_UNROLL
  for (int sub = 0; sub < 8 / kKeys; ++sub) {
    __m256 partial[kQueries][kKeys];
    ATTN_UNROLL
    for (int i = 0; i < kQueries; ++i) {
      ATTN_UNROLL
      for (int j = 0; j < kKeys; ++j) partial[i][j] = _mm256_setzero_ps();
    }
    for (int c = 0; c < kChunks; ++c) {
      ATTN_UNROLL
      for (int j = 0; j < kKeys; ++j) {
        const __m256 k = Load8(row_of(sub * kKeys + j) + 8 * c);
        ATTN_UNROLL
        for (int i = 0; i < kQueries; ++i) {
          partial[i][j] = _mm256_fmadd_ps(_mm256_loadu_ps(q + i * kDim + 8 * c), k, partial[i][j]);
        }
      }
    }
    __m256 v[8];
    ATTN_UNROLL
    for (int l = 0; l < 8; ++l) {
      v[l] = l < kQueries * kKeys ? partial[l / kKeys][l % kKeys] : partial[0][0];
    }
    alignas(32) float sums[8];
    _mm256_store_ps(sums, ReduceAdd8(v));
    ATTN_UNROLL
    for (int l = 0; l < kQueries * kKeys; ++l) tile[l / kKeys][sub * kKeys + l % kKeys] = sums[l];
  }
  ATTN_UNROLL
  for (int i = 0; i < kQueries; ++i) {
    KeepScores(_mm256_mul_ps(_mm256_load_ps(tile[i]), scale_v), count, scores + i * n, max_v[i]);
  }
}

// The score tile for kQueries queries of kChunks * 8 dims.
template <typename T, int kChunks, int kQueries, typename RowOf>
[[gnu::always_inline]] inline void AnyScoreTile(const float* q, RowOf row_of, int64_t count,
                                                __m256 scale_v, float* scores, int64_t n,
                                                __m256 (&max_v)[kQueries]) {
  if constexpr (kChunks > 4 && kQueries >= 2) {
    ScoreTileShared<T, kChunks, kQueries>(q, row_of, count, scale_v, scores, n, max_v);
  } else {
    ScoreTile<T, kChunks, kQueries>(q, row_of, count, scale_v, scores, n, max_v);
  }
}

// The V pass's accumulators per strip (queries x chunks): half the registers, the rest
// for the V row and the weights.
constexpr int kMaxAccumulators = 8;

// kQueries queries of kChunks * 8 dims over one KV head of T pages; scores holds kQueries
// rows of n = pos + 1 floats.
template <typename T, int kChunks, int kQueries>
void AttendFixed(const float* q, int64_t pos, int64_t kv_head, const int32_t* block_table,
                 const PagedKvView& kv, float scale, float* scores, float* out) {
  constexpr int64_t kDim = kChunks * 8;
  const int64_t n = pos + 1;
  const __m256 scale_v = _mm256_set1_ps(scale);
  __m256 max_v[kQueries];
  ATTN_UNROLL
  for (int i = 0; i < kQueries; ++i) max_v[i] = _mm256_set1_ps(-INFINITY);

  RowWalker<T> keys(kv.k, block_table, kv, kv_head);
  RowWalker<T> keys_ahead(kv.k, block_table, kv, kv_head);
  int64_t ahead = 0;
  for (; ahead < n && ahead < kPrefetchKeys; ++ahead, keys_ahead.Next()) {
    Prefetch<kChunks>(keys_ahead.Row(), ahead);
  }
  for (int64_t t0 = 0; t0 < n; t0 += 8) {
    const int64_t count = n - t0 < 8 ? n - t0 : 8;
    for (const int64_t stop = t0 + count + kPrefetchKeys; ahead < n && ahead < stop;
         ++ahead, keys_ahead.Next()) {
      Prefetch<kChunks>(keys_ahead.Row(), ahead);
    }
    // Eight keys in one block (every tile, for block sizes a multiple of 8) are rows at
    // fixed offsets from the first: no gathering of row addresses.
    if (const T* first = count == 8 ? keys.Rows(8) : nullptr) {
      AnyScoreTile<T, kChunks, kQueries>(
          q, [first](int j) { return first + j * kDim; }, 8, scale_v, scores + t0, n, max_v);
      continue;
    }
    const T* rows[8];
    for (int64_t j = 0; j < count; ++j, keys.Next()) rows[j] = keys.Row();
    // A short last tile repeats its last key in the lanes past it, and drops those lanes:
    // no row after pos is read, and each key's score comes from its own lane alone.
    for (int64_t j = count; j < 8; ++j) rows[j] = rows[count - 1];
    AnyScoreTile<T, kChunks, kQueries>(
        q, [&rows](int j) { return rows[j]; }, count, scale_v, scores + t0, n, max_v);
  }
  float inv[kQueries];
  ATTN_UNROLL
  for (int i = 0; i < kQueries; ++i) {
    inv[i] = 1.0f / ExpAndSum(scores + i * n, n, MaxLane(max_v[i]));
  }

  constexpr int kWidth =
      kMaxAccumulators / kQueries < kChunks ? kMaxAccumulators / kQueries : kChunks;
  int64_t c = 0;
  for (; c + kWidth <= kChunks; c += kWidth) {
    WeightedValues<T, kWidth, kQueries>(block_table, kv, kv_head, scores, n, 8 * c, inv, out);
  }
  if constexpr (kChunks % kWidth != 0) {
    WeightedValues<T, kChunks % kWidth, kQueries>(block_table, kv, kv_head, scores, n, 8 * c, inv,
                                                  out);
  }
}

// `count` queries through AttendFixed<T, kChunks, *>, up to kMax at a time.
template <typename T, int kChunks, int kMax>
void AttendInPasses(const float* q, int64_t count, int64_t pos, int64_t kv_head,
                    const int32_t* block_table, const PagedKvView& kv, float scale, float* scores,
                    float* out) {
  constexpr int64_t kDim = kChunks * 8;
  const int64_t n = pos + 1;
  for (; count >= kMax; count -= kMax, q += kMax * kDim, out += kMax * kDim, scores += kMax * n) {
    AttendFixed<T, kChunks, kMax>(q, pos, kv_head, block_table, kv, scale, scores, out);
  }
  if constexpr (kMax > 1) {
    if (count > 0) {
      AttendInPasses<T, kChunks, kMax - 1>(q, count, pos, kv_head, block_table, kv, scale, scores,
                                           out);
    }
  }
}

// Queries per pass for head_dim = 8 * kChunks: up to 4 where the whole head fits the V
// pass's accumulators (small heads such as stories260K's 8 have groups to share), and for
// the common heads of 64 (4) and 128 (2), whose score tiles share each key among the
// queries (ScoreTileShared) while the V pass walks the keys in strips of 8 / queries
// chunks. bf16 pages, one thread, position 1023, ns per query in GQA groups of 4 against
// one query per pass (`kernel_bench --attention`, AMD EPYC Zen 5 on avx2): head_dim 64
// 4690-4860 -> 3350-3590, head_dim 128 8790-9050 -> 6310-6560 (4 per pass: 7300-7880).
// One elsewhere, which keeps this file's instantiations (and compile time) small.
template <int kChunks>
constexpr int kQueriesPerPass = kChunks <= 2    ? 4
                                : kChunks <= 4  ? 2
                                : kChunks == 8  ? 4
                                : kChunks == 16 ? 2
                                                : 1;

using AttendFn = void (*)(const float*, int64_t, int64_t, int64_t, const int32_t*,
                          const PagedKvView&, float, float*, float*);

template <typename T, int... kMinus1>
constexpr std::array<AttendFn, sizeof...(kMinus1)> MakeAttendTable(
    std::integer_sequence<int, kMinus1...>) {
  return {&AttendInPasses<T, kMinus1 + 1, kQueriesPerPass<kMinus1 + 1>>...};
}

// Indexed by head_dim / 8 - 1, per element type.
constexpr auto kAttendF32 = MakeAttendTable<float>(std::make_integer_sequence<int, 32>());
constexpr auto kAttendBf16 = MakeAttendTable<Bf16>(std::make_integer_sequence<int, 32>());

}  // namespace

void AttendQueriesAvx2(const float* q, int64_t count, int64_t pos, int64_t kv_head,
                       const int32_t* block_table, const PagedKvView& kv, float scale,
                       float* scores, float* out) {
  const auto& table = kv.dtype == KvDtype::kBf16 ? kAttendBf16 : kAttendF32;
  table[kv.head_dim / 8 - 1](q, count, pos, kv_head, block_table, kv, scale, scores, out);
}

}  // namespace baton::cpu::internal
