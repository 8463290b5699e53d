#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/attention_internal.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/ops.h"

namespace baton::cpu {
namespace {
bool UseAvx512(const PagedKvView& kv) {
  return kv.head_dim % 16 == 0 && kv.head_dim <= 256 &&
         internal::CurrentIsa() >= internal::Isa::kAvx512;
}
}  // namespace

void AttendOneQuery(const float* q, int64_t pos, int64_t kv_head, const int32_t* block_table,
                    const PagedKvView& kv, float scale, float* scores, float* out) {
  if (UseAvx512(kv)) {
    internal::AttendQueriesAvx512(q, 1, pos, kv_head, block_table, kv, scale, scores, out);
    return;
  }
  const int64_t head_offset = kv_head * kv.head_stride;
  float max_score = -INFINITY;
  for (int64_t t = 0; t <= pos; ++t) {
    const int64_t block = block_table[t / kv.block_size];
    const float* key =
        kv.k + block * kv.block_stride + (t % kv.block_size) * kv.head_dim + head_offset;
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
    const float* value =
        kv.v + block * kv.block_stride + (t % kv.block_size) * kv.head_dim + head_offset;
    const float w = scores[t];
    for (int64_t d = 0; d < kv.head_dim; ++d) out[d] += w * value[d];
  }
  const float inv = 1.0f / sum;
  for (int64_t d = 0; d < kv.head_dim; ++d) out[d] *= inv;
}

void AttendQueries(const float* q, int64_t count, int64_t pos, int64_t kv_head,
                   const int32_t* block_table, const PagedKvView& kv, float scale, float* scores,
                   float* out) {
  if (UseAvx512(kv)) {
    internal::AttendQueriesAvx512(q, count, pos, kv_head, block_table, kv, scale, scores, out);
    return;
  }
  for (int64_t i = 0; i < count; ++i) {
    AttendOneQuery(q + i * kv.head_dim, pos, kv_head, block_table, kv, scale, scores,
                   out + i * kv.head_dim);
  }
}

}  // namespace baton::cpu
