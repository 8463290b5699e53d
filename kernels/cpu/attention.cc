#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/attention_internal.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/ops.h"

namespace baton::cpu {
namespace {

using VectorKernel = void (*)(const float*, int64_t, int64_t, int64_t, const int32_t*,
                              const PagedKvView&, float, float*, float*);

// The SIMD kernel for kv's head size on this CPU, or null for the baseline path. Below 64
// the AVX2 kernel is the faster one even where AVX-512 is there: for head_dim 32 in GQA
// pairs, 290 against 495 ns per query at position 127 (`kernel_bench --attention`, AMD
// EPYC Zen 5); from 64 up, the AVX-512 kernel's groups win.
VectorKernel PickKernel(const PagedKvView& kv) {
  if (kv.head_dim > 256) return nullptr;
  const internal::Isa isa = internal::CurrentIsa();
  if (kv.head_dim % 16 == 0 && kv.head_dim >= 64 && isa >= internal::Isa::kAvx512) {
    return &internal::AttendQueriesAvx512;
  }
  if (kv.head_dim % 8 == 0 && isa >= internal::Isa::kAvx2) return &internal::AttendQueriesAvx2;
  return nullptr;
}

// out[d] += w * value[d] for d < n, eight lanes at a time that the compiler keeps in
// vector registers (as Dot's), widening bf16 on the way. Each out[d] still adds one
// product per call, so the sums keep their key order.
template <typename T>
void AddScaledRow(float w, const T* __restrict value, int64_t n, float* __restrict out) {
  int64_t d = 0;
  for (; d + 8 <= n; d += 8) {
    for (int l = 0; l < 8; ++l) out[d + l] += w * ToFloat(value[d + l]);
  }
  for (; d < n; ++d) out[d] += w * ToFloat(value[d]);
}

// The baseline-ISA path over pages of T (float or Bf16).
template <typename T>
void AttendOneQueryOf(const float* q, int64_t pos, int64_t kv_head, const int32_t* block_table,
                      const PagedKvView& kv, float scale, float* scores, float* out) {
  const T* k = static_cast<const T*>(kv.k);
  const T* v = static_cast<const T*>(kv.v);
  const int64_t head_offset = kv_head * kv.head_stride;
  float max_score = -INFINITY;
  for (int64_t t = 0; t <= pos; ++t) {
    const int64_t block = block_table[t / kv.block_size];
    const T* key = k + block * kv.block_stride + (t % kv.block_size) * kv.head_dim + head_offset;
    scores[t] = Dot(q, key, kv.head_dim) * scale;
    max_score = std::max(max_score, scores[t]);
  }
  float sum = 0.0f;
  for (int64_t t = 0; t <= pos; ++t) {
    scores[t] = std::exp(scores[t] - max_score);
    sum += scores[t];
  }
  std::fill(out, out + kv.head_dim, 0.0f);
  for (int64_t t = 0; t <= pos; ++t) {
    const int64_t block = block_table[t / kv.block_size];
    const T* value = v + block * kv.block_stride + (t % kv.block_size) * kv.head_dim + head_offset;
    AddScaledRow(scores[t], value, kv.head_dim, out);
  }
  const float inv = 1.0f / sum;
  for (int64_t d = 0; d < kv.head_dim; ++d) out[d] *= inv;
}

}  // namespace

void AttendOneQuery(const float* q, int64_t pos, int64_t kv_head, const int32_t* block_table,
                    const PagedKvView& kv, float scale, float* scores, float* out) {
  if (const VectorKernel kernel = PickKernel(kv)) {
    kernel(q, 1, pos, kv_head, block_table, kv, scale, scores, out);
    return;
  }
  switch (kv.dtype) {
    case KvDtype::kF32:
      AttendOneQueryOf<float>(q, pos, kv_head, block_table, kv, scale, scores, out);
      return;
    case KvDtype::kBf16:
      AttendOneQueryOf<Bf16>(q, pos, kv_head, block_table, kv, scale, scores, out);
      return;
  }
}

void AttendQueries(const float* q, int64_t count, int64_t pos, int64_t kv_head,
                   const int32_t* block_table, const PagedKvView& kv, float scale, float* scores,
                   float* out) {
  if (const VectorKernel kernel = PickKernel(kv)) {
    kernel(q, count, pos, kv_head, block_table, kv, scale, scores, out);
    return;
  }
  for (int64_t i = 0; i < count; ++i) {
    AttendOneQuery(q + i * kv.head_dim, pos, kv_head, block_table, kv, scale, scores,
                   out + i * kv.head_dim);
  }
}

}  // namespace baton::cpu
