// The contract between the dispatcher (matmul.cc) and the per-ISA kernel files.
//
// The ISA files are compiled with their own -m flags, so they hold no inline function or
// template that another file could also instantiate: the linker might keep their copy,
// with instructions the CPU lacks. Only plain declarations cross this header.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/quant_dot.h"

namespace baton::cpu::internal {

struct GemmArgs {
  const float* x = nullptr;  // m rows, stride x_stride floats
  int64_t m = 0;
  int64_t x_stride = 0;
  // x rounded to bf16 and zero-padded to a multiple of 32 columns (the avx512bf16 kernel
  // for bf16 weights only).
  const uint16_t* xb = nullptr;
  int64_t xb_stride = 0;
  const uint8_t* w = nullptr;  // row j at w + j * w_row_bytes
  DType dtype = DType::kF32;
  int64_t k = 0;
  size_t w_row_bytes = 0;
  const float* bias = nullptr;
  float* y = nullptr;
  int64_t y_stride = 0;
  // x as Q8K blocks, k / 256 per row, or (the 32-value types) as Q8Block32 blocks, k / 32
  // per row; rows xq_stride blocks apart (GemmQ8K only).
  const Q8KBlock* xq = nullptr;
  const Q8Block32* xq32 = nullptr;
  int64_t xq_stride = 0;
};

// Each computes y[0:m, j0:j1]. Per output element the arithmetic depends only on k and
// the dtype, never on m, j0, j1 or which tile the element falls in.
void GemmScalar(const GemmArgs& a, int64_t j0, int64_t j1);
void GemmAvx2(const GemmArgs& a, int64_t j0, int64_t j1);
void GemmAvx512(const GemmArgs& a, int64_t j0, int64_t j1);
void GemmAvx512Bf16(const GemmArgs& a, int64_t j0, int64_t j1);  // bf16 weights only

// K-quant weights times Q8K rows (quant_dot.h), every ISA: y[i, j] for j in [j0, j1).
void GemmQ8K(const GemmArgs& a, int64_t j0, int64_t j1);
// One K-quant weight row times `rows` (1-4) Q8K rows of `blocks` blocks each: out[r].
void DotRowsAvx2(DType dtype, const uint8_t* row, const Q8KBlock* const* x, int rows,
                 int64_t blocks, float* out);
void DotRowsAvx512(DType dtype, const uint8_t* row, const Q8KBlock* const* x, int rows,
                   int64_t blocks, float* out);
// y[0:m, j:j+16] of weights of a type with an int8 product times their activation blocks,
// the 16 rows of W unpacked once for every row of x (quant_tile_avx512vnni.cc); the same
// bits as DotRows* and DotRowsLegacy*. Needs AVX-512 (F/BW) and VNNI.
void TileQ8KAvx512Vnni(const GemmArgs& a, int64_t j);
// The same for the 32-value types (Q8_0, Q4_0, Q5_0, Q4_1, Q5_1) and Q8Block32 rows.
void DotRowsLegacyAvx2(DType dtype, const uint8_t* row, const Q8Block32* const* x, int rows,
                       int64_t blocks, float* out);
// The AVX2 kernel compiled for AVX-512 (BW/VL): byte masks from k registers, 32 registers.
void DotRowsLegacyAvx512(DType dtype, const uint8_t* row, const Q8Block32* const* x, int rows,
                         int64_t blocks, float* out);
// Weight rows `row` and `row + row_bytes` times one row of x (decode): out[0], out[1], the
// same bits as two calls of the above.
void DotRowPairLegacyAvx2(DType dtype, const uint8_t* row, size_t row_bytes, const Q8Block32* x,
                          int64_t blocks, float out[2]);
void DotRowPairLegacyAvx512(DType dtype, const uint8_t* row, size_t row_bytes, const Q8Block32* x,
                            int64_t blocks, float out[2]);
// y[0:m, j:j+16] as TileQ8KAvx512Vnni with AVX2 alone (quant_tile_avx2.cc), for the
// types it has panels for; false (nothing written) for the others.
bool TileQ8Avx2(const GemmArgs& a, int64_t j);

// QuantizeRowQ8K and QuantizeRowQ8Block32 (quant_dot.h) with AVX2: the same bits
// (quant_activations_avx2.cc).
void QuantizeRowQ8KAvx2(const float* x, int64_t k, Q8KBlock* out);
void QuantizeRowQ8Block32Avx2(const float* x, int64_t k, Q8Block32* out);

// n values (whole blocks) of a block-quantized row to f32, exactly as DequantizeBlocks,
// compiled for each ISA (quant_dequant_<isa>.cc).
void DequantRowAvx2(DType dtype, const uint8_t* src, int64_t n, float* out);
void DequantRowAvx512(DType dtype, const uint8_t* src, int64_t n, float* out);

// Rows [r0, r1) of x to bf16 (round to nearest even), padded with zeros to `padded_k`
// columns (a multiple of 32). Needs avx512bf16.
void PackBf16Avx512Bf16(const float* x, int64_t x_stride, int64_t r0, int64_t r1, int64_t k,
                        uint16_t* out, int64_t out_stride, int64_t padded_k);

// The ISA every dispatcher uses: the best the CPU has, capped by BATON_CPU_ISA, or the
// one SetIsaForTesting forced.
Isa CurrentIsa();

// Exact f16 -> f32 without F16C.
float HalfToFloat(uint16_t h);
// f32 -> f16 rounded to nearest even (as F16C's vcvtps2ph with rounding 0) without F16C.
uint16_t FloatToHalf(float f);

// At least n floats of this thread's scratch, 64-byte aligned and kept between calls (the
// SIMD files dequantize rows of W into it; they may not instantiate std::vector).
float* ThreadScratch(size_t n);

}  // namespace baton::cpu::internal
