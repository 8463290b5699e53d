// The contract between attention.cc (the dispatcher) and the per-ISA attention files,
// which are compiled with their own -m flags: plain declarations only (see
// matmul_internal.h for why).
#pragma once

#include <cstdint>

#include "kernels/cpu/attention.h"

namespace baton::cpu::internal {

// AttendQueries for head_dim a multiple of 16, at most 256, over pages of kv.dtype.
// Needs AVX-512F.
void AttendQueriesAvx512(const float* q, int64_t count, int64_t pos, int64_t kv_head,
                         const int32_t* block_table, const PagedKvView& kv, float scale,
                         float* scores, float* out);

// AttendQueries for head_dim a multiple of 8, at most 256, over pages of kv.dtype. Needs
// AVX2 and FMA.
void AttendQueriesAvx2(const float* q, int64_t count, int64_t pos, int64_t kv_head,
                       const int32_t* block_table, const PagedKvView& kv, float scale,
                       float* scores, float* out);

}  // namespace baton::cpu::internal
