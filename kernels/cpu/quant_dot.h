// Products of block-quantized weights with activations rounded to 8-bit blocks: llama.cpp's
// numerics for its quantized matrix products (docs/models.md, "Quantized weights"), opt-in
// per weight with MatrixRef::int8_activations.
//
// For the K-quants a row of x is cut into blocks of 256 values, each an f32 scale d and 256
// int8 values (x ~ d * q, q in [-127, 127]; ggml's block_q8_K and its rounding, sums of
// every 16 kept too). For the 32-value types (Q8_0, Q4_0, Q5_0, Q4_1, Q5_1) into blocks of
// 32, as ggml's block_q8_0/q8_1 on x86: d rounded to f16, q = x * (127 / max|x|) rounded to
// nearest even, and f16(d * sum(q)) for the types with a minimum. A weight block times an
// activation block is then an exact integer sum of products (u8 x s8 pairs, 32 to 64 per
// instruction) and a few f32 operations per block. Each row of x is rounded alone and each
// product is one row's, so the results do not depend on m: batch invariant. Every kernel
// and ISA adds the blocks' integer sums in one f32 order (quant_dot_inl.h), so they all
// give the same bits.
#pragma once

#include <cstdint>

#include "kernels/cpu/matmul.h"

namespace baton::cpu {

inline constexpr int kQ8KBlock = 256;

struct Q8KBlock {
  float d = 0;
  int8_t qs[kQ8KBlock] = {};
  int16_t bsums[kQ8KBlock / 16] = {};  // sum of qs over each 16 values
};

inline constexpr int kQ8Block32 = 32;

struct Q8Block32 {
  float d = 0;  // the f16 scale, widened
  float s = 0;  // f16(d * sum(qs)), widened (the Q4_1/Q5_1 minimum's factor)
  int32_t sum = 0;
  int8_t qs[kQ8Block32] = {};
};

// The weight types with an int8 product: the K-quants Q4_K, Q5_K and Q6_K (what the
// K-quant mixes, Q4_K_M above all, are made of) against Q8KBlock rows, and Q8_0, Q4_0,
// Q5_0, Q4_1 and Q5_1 (which the mixes use where a row is not a multiple of 256) against
// Q8Block32 rows. Q2_K and Q3_K have none.
bool HasInt8Product(DType dtype);
// Which activation blocks a type with an int8 product takes: 256 (Q8KBlock) or 32.
int ActivationBlock(DType dtype);

// x[0, k) (k a multiple of 256) into k / 256 blocks, as ggml's quantize_row_q8_K_ref:
// d = -max / 127 where max is the value of largest magnitude, q = round(x / d) to nearest
// even, capped at 127.
void QuantizeRowQ8K(const float* x, int64_t k, Q8KBlock* out);

// x[0, k) (k a multiple of 32) into k / 32 blocks.
void QuantizeRowQ8Block32(const float* x, int64_t k, Q8Block32* out);

// The dot product of one weight row (k / 256 blocks of `dtype`) with one quantized row.
float DotQ8K(DType dtype, const uint8_t* w_row, const Q8KBlock* x, int64_t blocks);
// The same for the 32-value types (k / 32 blocks).
float DotQ8Block32(DType dtype, const uint8_t* w_row, const Q8Block32* x, int64_t blocks);

}  // namespace baton::cpu
