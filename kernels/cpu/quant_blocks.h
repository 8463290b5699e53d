// ggml's block-quantized weight types: their block geometry and an exact dequantization.
// A block of `elems` consecutive values of a row is stored in `bytes` bytes; f16 scales
// sit at `scale_offsets` within it (the values a corrupt file can make NaN or Inf).
#pragma once

#include <cstdint>

#include "kernels/cpu/matmul.h"

namespace baton::cpu {

struct BlockLayout {
  int elems = 1;  // values per block (1 for the unquantized types)
  int bytes = 4;  // bytes per block
  int scale_offsets[2] = {-1, -1};
};

// Evaluated at compile time where the SIMD files use it (see matmul_internal.h).
constexpr BlockLayout LayoutOf(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return {1, 4, {-1, -1}};
    case DType::kF16:
    case DType::kBF16:
      return {1, 2, {-1, -1}};
    case DType::kQ4_0:
      return {32, 18, {0, -1}};
    case DType::kQ4_1:
      return {32, 20, {0, 2}};
    case DType::kQ5_0:
      return {32, 22, {0, -1}};
    case DType::kQ5_1:
      return {32, 24, {0, 2}};
    case DType::kQ8_0:
      return {32, 34, {0, -1}};
    case DType::kQ2_K:
      return {256, 84, {80, 82}};
    case DType::kQ3_K:
      return {256, 110, {108, -1}};
    case DType::kQ4_K:
      return {256, 144, {0, 2}};
    case DType::kQ5_K:
      return {256, 176, {0, 2}};
    case DType::kQ6_K:
      return {256, 210, {208, -1}};
  }
  return {};
}

constexpr bool IsBlockQuantized(DType dtype) { return LayoutOf(dtype).elems > 1; }

// n values (a multiple of the block size) from n / elems blocks, bit for bit as ggml's
// to_float gives them.
void DequantizeBlocks(DType dtype, const uint8_t* blocks, int64_t n, float* out);

}  // namespace baton::cpu
