// Conversions between f32 and the 16-bit float formats model files store (IEEE binary16
// and bfloat16), plus GGUF Q8_0 block quantization. The loader widens small vectors
// (norms, biases) with these; the writers narrow synthetic weights with them. Both
// directions round to nearest even, as PyTorch's .to(torch.bfloat16/float16) and
// gguf-py do, so a file we write holds the same bits theirs would.
#pragma once

#include <cstdint>
#include <span>

namespace baton::model {

float F16ToF32(uint16_t h);
uint16_t F32ToF16(float f);
float Bf16ToF32(uint16_t b);
uint16_t F32ToBf16(float f);

// One GGUF Q8_0 block: 32 int8 values and their f16 scale d; x[i] ~= d * qs[i].
inline constexpr int kQ8BlockElems = 32;
inline constexpr int kQ8BlockBytes = 34;

// Quantizes x (a multiple of 32 floats) into x.size()/32 blocks of 34 bytes at `out`,
// as ggml's quantize_row_q8_0_ref: d = max|x|/127, q = round(x/d).
void QuantizeQ8_0(std::span<const float> x, uint8_t* out);
// The inverse, for tests and for vectors stored as Q8_0: n floats from n/32 blocks.
void DequantizeQ8_0(const uint8_t* blocks, int64_t n, float* out);

}  // namespace baton::model
