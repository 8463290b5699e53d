// AttendOneQuery and AttendQueries with AVX-512F, for head_dim a multiple of 16, over f32
// or bf16 pages. Compiled with -mavx512f (isa_flags.cmake); attention.cc calls them only
// when the CPU has AVX-512.
//
// Per query, in three passes over its keys, always in key order from position 0:
//   1. scores: 16 keys at a time, each key's 16-lane partial dot products reduced by a
//      fixed transpose-and-add tree, so every key's sum has one fixed order;
//   2. exp(score - max) with a fixed polynomial (Cephes expf), and their sum;
//   3. the weighted sum of V rows, key by key.
// Nothing depends on other queries, on where a prefill chunk starts or on the thread, so
// a query's result is the same in any batch. Queries that share a KV head may go through
// one pass together: each K tile and V row is then loaded once for all of them, and the
// V pass has one independent FMA chain per query and lane group instead of a chain
// bound by FMA latency. Each query's arithmetic stays exactly as above.
//
// Every kernel is a template on the pages' element type T: a bf16 row is widened to f32
// as it is loaded (16 lanes zero-extended and shifted up by 16 bits, which is exact), and
// from there the arithmetic is the f32 path's, so the passes are the same code.
#include "kernels/cpu/simd.h"

#include <array>
#include <cmath>
#include <cstdint>
#include <utility>

#include "kernels/cpu/attention_internal.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/exp_avx512_inl.h"

// Loops over a fixed count must be unrolled completely, or the accumulators and partial
// sums live on the stack (GCC at -O2 does not unroll them by itself).
#define ATTN_UNROLL _Pragma("GCC unroll 16")

namespace baton::cpu::internal {
namespace {

// r[j] = the sum of v[j]'s 16 lanes, for 16 vectors, by a fixed tree.
[[gnu::always_inline]] inline __m512 ReduceAdd16(const __m512 (&v)[16]) {
  __m512 a[8];
  ATTN_UNROLL
  for (int i = 0; i < 8; ++i) {  // per 128-bit lane: [x0+x2, y0+y2, x1+x3, y1+y3]
    a[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]),
                         _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  }
  __m512 b[4];
  ATTN_UNROLL
  for (int i = 0; i < 4; ++i) {  // per 128-bit lane: keys 4i..4i+3, partial over the lane
    const __m512d x = _mm512_castps_pd(a[2 * i]), y = _mm512_castps_pd(a[2 * i + 1]);
    b[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)),
                         _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
  }
  // Sum the four 128-bit lanes of each b[i]: two rounds of lane transposes.
  const __m512 s01 =
      _mm512_add_ps(_mm512_shuffle_f32x4(b[0], b[1], 0x88), _mm512_shuffle_f32x4(b[0], b[1], 0xDD));
  const __m512 s23 =
      _mm512_add_ps(_mm512_shuffle_f32x4(b[2], b[3], 0x88), _mm512_shuffle_f32x4(b[2], b[3], 0xDD));
  return _mm512_add_ps(_mm512_shuffle_f32x4(s01, s23, 0x88), _mm512_shuffle_f32x4(s01, s23, 0xDD));
}

// 16 elements of a K or V row as f32.
[[gnu::always_inline]] inline __m512 Load16(const float* p) { return _mm512_loadu_ps(p); }
[[gnu::always_inline]] inline __m512 Load16(const Bf16* p) {
  const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
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
    if (offset_ == 0) block_base_ = base_ + table_[block_] * block_stride_;
    return block_base_ + offset_ * row_stride_;
  }
  void Next() {
    if (++offset_ == block_size_) {
      offset_ = 0;
      ++block_;
    }
  }

 private:
  const T* base_;
  const int32_t* table_;
  int64_t block_stride_, block_size_, row_stride_;
  int64_t block_ = 0, offset_ = 0;
  const T* block_base_ = nullptr;
};

// A head's rows are contiguous within a page, but the next page's are elsewhere (every
// layer's K and V sit in between), so the hardware prefetchers lose the stream at each
// page: without help a thread reads K and V at memory latency, about a third of its
// streaming bandwidth. Each pass therefore asks for the rows kPrefetchKeys positions
// ahead of the one it is on.
constexpr int64_t kPrefetchKeys = 16;

// Asks for the cache lines of a row of kChunks * 16 elements of T (a bf16 row needs half
// the lines of an f32 one).
template <int kChunks, typename T>
void PrefetchRow(const T* row) {
  constexpr int kLines = (kChunks * 16 * static_cast<int>(sizeof(T)) + 63) / 64;
  ATTN_UNROLL
  for (int i = 0; i < kLines; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(row) + 64 * i, _MM_HINT_T0);
  }
}

// The sum of scores[0..n) with 16 lanes in key order and a fixed tree over the lanes, after
// replacing each score by exp(score - max).
float ExpAndSum(float* scores, int64_t n, float max) {
  const __m512 max_b = _mm512_set1_ps(max);
  __m512 sum_v = _mm512_setzero_ps();
  for (int64_t t0 = 0; t0 < n; t0 += 16) {
    const int64_t count = n - t0 < 16 ? n - t0 : 16;
    const __mmask16 mask = static_cast<__mmask16>((1u << count) - 1);
    const __m512 e = Exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask, scores + t0), max_b));
    _mm512_mask_storeu_ps(scores + t0, mask, e);
    sum_v = _mm512_mask_add_ps(sum_v, mask, sum_v, e);
  }
  // A fixed tree over the 16 lanes (reduce_add's order is the compiler's choice).
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum_v);
  for (int step = 8; step >= 1; step /= 2) {
    for (int i = 0; i < step; ++i) lanes[i] += lanes[i + step];
  }
  return lanes[0];
}

// kQueries queries of kChunks * 16 dims over one KV head of T pages; scores holds
// kQueries rows of n = pos + 1 floats.
template <typename T, int kChunks, int kQueries>
void AttendFixed(const float* q, int64_t pos, int64_t kv_head, const int32_t* block_table,
                 const PagedKvView& kv, float scale, float* scores, float* out) {
  constexpr int64_t kDim = kChunks * 16;
  const int64_t n = pos + 1;
  const __m512 scale_v = _mm512_set1_ps(scale);
  __m512 max_v[kQueries];
  ATTN_UNROLL
  for (int i = 0; i < kQueries; ++i) max_v[i] = _mm512_set1_ps(-INFINITY);

  RowWalker<T> keys(kv.k, block_table, kv, kv_head);
  RowWalker<T> keys_ahead(kv.k, block_table, kv, kv_head);
  int64_t ahead = 0;
  for (; ahead < n && ahead < kPrefetchKeys; ++ahead, keys_ahead.Next()) {
    PrefetchRow<kChunks>(keys_ahead.Row());
  }
  for (int64_t t0 = 0; t0 < n; t0 += 16) {
    const int64_t count = n - t0 < 16 ? n - t0 : 16;
    const T* rows[16];
    for (int64_t j = 0; j < count; ++j, keys.Next()) rows[j] = keys.Row();
    for (const int64_t stop = t0 + count + kPrefetchKeys; ahead < n && ahead < stop;
         ++ahead, keys_ahead.Next()) {
      PrefetchRow<kChunks>(keys_ahead.Row());
    }
    const __mmask16 mask = static_cast<__mmask16>((1u << count) - 1);
    ATTN_UNROLL
    for (int i = 0; i < kQueries; ++i) {
      __m512 partial[16];
      ATTN_UNROLL
      for (int64_t j = 0; j < 16; ++j) {
        partial[j] = _mm512_setzero_ps();
        if (j >= count) continue;
        ATTN_UNROLL
        for (int c = 0; c < kChunks; ++c) {
          partial[j] = _mm512_fmadd_ps(_mm512_loadu_ps(q + i * kDim + 16 * c),
                                       Load16(rows[j] + 16 * c), partial[j]);
        }
      }
      const __m512 s = _mm512_mul_ps(ReduceAdd16(partial), scale_v);
      _mm512_mask_storeu_ps(scores + i * n + t0, mask, s);
      max_v[i] = _mm512_mask_max_ps(max_v[i], mask, max_v[i], s);
    }
  }
  float inv[kQueries];
  ATTN_UNROLL
  for (int i = 0; i < kQueries; ++i) {
    inv[i] = 1.0f / ExpAndSum(scores + i * n, n, _mm512_reduce_max_ps(max_v[i]));
  }

  __m512 acc[kQueries][kChunks];
  ATTN_UNROLL
  for (int i = 0; i < kQueries; ++i) {
    ATTN_UNROLL
    for (int c = 0; c < kChunks; ++c) acc[i][c] = _mm512_setzero_ps();
  }
  RowWalker<T> values(kv.v, block_table, kv, kv_head);
  RowWalker<T> values_ahead(kv.v, block_table, kv, kv_head);
  for (int64_t t = 0; t < n && t < kPrefetchKeys; ++t, values_ahead.Next()) {
    PrefetchRow<kChunks>(values_ahead.Row());
  }
  for (int64_t t = 0; t < n; ++t, values.Next()) {
    const T* value = values.Row();
    if (t + kPrefetchKeys < n) {
      PrefetchRow<kChunks>(values_ahead.Row());
      values_ahead.Next();
    }
    ATTN_UNROLL
    for (int c = 0; c < kChunks; ++c) {
      const __m512 v = Load16(value + 16 * c);
      ATTN_UNROLL
      for (int i = 0; i < kQueries; ++i) {
        acc[i][c] = _mm512_fmadd_ps(_mm512_set1_ps(scores[i * n + t]), v, acc[i][c]);
      }
    }
  }
  ATTN_UNROLL
  for (int i = 0; i < kQueries; ++i) {
    const __m512 inv_v = _mm512_set1_ps(inv[i]);
    ATTN_UNROLL
    for (int c = 0; c < kChunks; ++c) {
      _mm512_storeu_ps(out + i * kDim + 16 * c, _mm512_mul_ps(acc[i][c], inv_v));
    }
  }
}

// `count` queries through AttendFixed<T, kChunks, *>, up to kMax at a time.
template <typename T, int kChunks, int kMax>
void AttendInPasses(const float* q, int64_t count, int64_t pos, int64_t kv_head,
                    const int32_t* block_table, const PagedKvView& kv, float scale, float* scores,
                    float* out) {
  constexpr int64_t kDim = kChunks * 16;
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

// Queries per pass for head_dim = 16 * kChunks: up to 16 V-pass accumulators (queries x
// chunks), which leaves registers for the V row and the weights. Only the common head
// sizes, 64 and 128, get more than one.
template <int kChunks>
constexpr int kQueriesPerPass = kChunks == 4   ? 4
                                : kChunks == 8 ? 2
                                               : 1;

using AttendFn = void (*)(const float*, int64_t, int64_t, int64_t, const int32_t*,
                          const PagedKvView&, float, float*, float*);

template <typename T, int... kMinus1>
constexpr std::array<AttendFn, sizeof...(kMinus1)> MakeAttendTable(
    std::integer_sequence<int, kMinus1...>) {
  return {&AttendInPasses<T, kMinus1 + 1, kQueriesPerPass<kMinus1 + 1>>...};
}

// Indexed by head_dim / 16 - 1, per element type.
constexpr auto kAttendF32 = MakeAttendTable<float>(std::make_integer_sequence<int, 16>());
constexpr auto kAttendBf16 = MakeAttendTable<Bf16>(std::make_integer_sequence<int, 16>());

}  // namespace

void AttendQueriesAvx512(const float* q, int64_t count, int64_t pos, int64_t kv_head,
                         const int32_t* block_table, const PagedKvView& kv, float scale,
                         float* scores, float* out) {
  const auto& table = kv.dtype == KvDtype::kBf16 ? kAttendBf16 : kAttendF32;
  table[kv.head_dim / 16 - 1](q, count, pos, kv_head, block_table, kv, scale, scores, out);
}

}  // namespace baton::cpu::internal
