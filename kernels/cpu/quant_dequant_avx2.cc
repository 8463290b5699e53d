// Rows of block-quantized weights to f32 for the avx2 matmul kernels. The block loops of
// quant_blocks_inl.h are plain C++ that GCC vectorizes at -O3 (isa_flags.cmake), with the
// same IEEE operations per element as the scalar reference, so the values are identical.
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/quant_blocks_inl.h"

namespace baton::cpu::internal {

void DequantRowAvx2(DType dtype, const uint8_t* src, int64_t n, float* out) {
  DequantValues(dtype, src, n, out);
}

}  // namespace baton::cpu::internal
