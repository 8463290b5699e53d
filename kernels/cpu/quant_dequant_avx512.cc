// Rows of block-quantized weights to f32 for the avx512 matmul kernels: the intrinsics of
// quant_dequant_simd_inl.h for the common K-quants and Q5_0, the plain block loops of
// quant_blocks_inl.h (vectorized at -O3, isa_flags.cmake) for the rest; identical values.
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/quant_dequant_simd_inl.h"

namespace baton::cpu::internal {

void DequantRowAvx512(DType dtype, const uint8_t* src, int64_t n, float* out) {
  DequantValuesSimd(dtype, src, n, out);
}

}  // namespace baton::cpu::internal
