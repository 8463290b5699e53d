// The contract between ops.cc (the dispatcher) and the per-ISA elementwise files, which
// are compiled with their own -m flags: plain declarations only (see matmul_internal.h).
#pragma once

#include <cstdint>

namespace baton::cpu::internal {

// SwiGlu with AVX-512F and exp_avx512_inl.h's exp.
void SwiGluAvx512(const float* gate, const float* up, int64_t n, float* out);
// SwiGlu with AVX2/FMA and exp_avx2_inl.h's exp.
void SwiGluAvx2(const float* gate, const float* up, int64_t n, float* out);

// FloatToBf16Row (bf16.h) with AVX-512F: the same bits as the scalar FloatToBf16.
void FloatToBf16RowAvx512(const float* x, int64_t n, uint16_t* out);

}  // namespace baton::cpu::internal
