// Matrix products of f32 activations with weights in their stored type.
//
// Batch invariance: y[i, j] depends only on x[i, :] and row j of W, and is bit-identical
// whatever m is, whatever the other rows of x hold and however many threads run. Every
// output element is reduced over k in one fixed order. That makes a sequence's logits
// independent of the batch around it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "common/thread_pool.h"

namespace baton::cpu {

// The stored type of a weight matrix: plain floats, or one of ggml's block-quantized types
// (quant_blocks.h: 32 values per block for Q4_0..Q8_0, 256 for the K-quants).
enum class DType : uint8_t {
  kF32,
  kF16,
  kBF16,
  kQ8_0,
  kQ4_0,
  kQ4_1,
  kQ5_0,
  kQ5_1,
  kQ2_K,
  kQ3_K,
  kQ4_K,
  kQ5_K,
  kQ6_K,
};

// "f32", "f16", "bf16", and ggml's names: "q8_0", "q4_0", ..., "q4_K", "q6_K".
const char* DTypeName(DType dtype);
// Bytes of one row of `cols` elements; for a block-quantized type, cols must be a
// multiple of its block (quant_blocks.h).
size_t RowBytes(DType dtype, int64_t cols);

// A weight matrix W[rows, cols], row-major: each of the `rows` outputs owns one contiguous
// row of `cols` inputs (HF and GGUF linear layers: out_features x in_features). The data
// is used in place (usually a memory-mapped file).
struct MatrixRef {
  DType dtype = DType::kF32;
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  // For the types with an int8 product (quant_dot.h: Q4_K, Q5_K, Q6_K, Q8_0, Q4_0, Q5_0,
  // Q4_1, Q5_1): round each row of x to 8-bit blocks and multiply integers, as llama.cpp
  // does, instead of widening the weights to f32. Ignored for other types.
  bool int8_activations = false;
};

// y[i, :] = x[i, :] . W^T (+ bias) for i < m. x has row stride x_stride floats, y has
// row stride y_stride floats. bias may be null (else `w.rows` floats).
void MatMul(const float* x, int64_t m, int64_t x_stride, const MatrixRef& w, const float* bias,
            float* y, int64_t y_stride, ThreadPool* pool);

// One of several products of the same x: y = x . W^T (+ bias).
struct MatMulTarget {
  MatrixRef w;
  const float* bias = nullptr;
  float* y = nullptr;
  int64_t y_stride = 0;
};

// MatMul for each target, all with the same x (e.g. the Q, K and V projections): one pass
// of the pool over all their rows of W, and x converted once, so a decode step pays one
// thread hand-off instead of one per matrix. Every element is computed exactly as MatMul
// computes it.
void MatMulShared(const float* x, int64_t m, int64_t x_stride,
                  std::span<const MatMulTarget> targets, ThreadPool* pool);

// Row `row` of W as f32 (embedding lookup). out holds w.cols floats.
void DequantizeRow(const MatrixRef& w, int64_t row, float* out);

// The instruction set the dispatcher chose on this CPU: "avx512bf16", "avx512", "avx2",
// "scalar". BATON_CPU_ISA=scalar|avx2|avx512|avx512bf16 caps it (for tests and benchmarks).
//
// Numerics per ISA (each is batch invariant on its own; results differ between ISAs):
// f32, f16 and bf16 weights are widened exactly to f32 and multiplied with f32 x by fused
// multiply-adds; block-quantized weights become f32 first, exactly as DequantizeRow gives
// them, and are then multiplied as f32 weights are (bit for bit the product with the
// dequantized matrix). On "avx512bf16", bf16 weights instead meet x rounded to bf16 (round to
// nearest even) in vdpbf16ps, which adds a relative error of up to 2^-8 per product.
const char* ActiveIsa();

namespace internal {

enum class Isa : uint8_t { kScalar, kAvx2, kAvx512, kAvx512Bf16 };
const char* IsaName(Isa isa);
// Whether this CPU (and OS) can run `isa`.
bool IsaSupported(Isa isa);
// Forces the ISA for the following calls (a test loops over the supported ones); the
// ISA must be supported. ResetIsaForTesting returns to the automatic choice.
void SetIsaForTesting(Isa isa);
void ResetIsaForTesting();

}  // namespace internal

}  // namespace baton::cpu
