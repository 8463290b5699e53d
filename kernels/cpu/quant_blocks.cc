#include "kernels/cpu/quant_blocks.h"

#include "common/check.h"
#include "kernels/cpu/quant_blocks_inl.h"

namespace baton::cpu {

void DequantizeBlocks(DType dtype, const uint8_t* blocks, int64_t n, float* out) {
  const BlockLayout layout = LayoutOf(dtype);
  BATON_CHECK(layout.elems > 1 && n % layout.elems == 0);
  internal::DequantValues(dtype, blocks, n, out);
}

}  // namespace baton::cpu
