#include "kernels/cpu/bf16.h"

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/ops_internal.h"

namespace baton::cpu {

void FloatToBf16Row(const float* x, int64_t n, Bf16* out) {
  if (internal::CurrentIsa() >= internal::Isa::kAvx512) {
    internal::FloatToBf16RowAvx512(x, n, &out->bits);
    return;
  }
  for (int64_t i = 0; i < n; ++i) out[i] = FloatToBf16(x[i]);
}

}  // namespace baton::cpu
