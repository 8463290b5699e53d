// bfloat16 on the CPU: the element type of KV pages that GPU workers hold too
// (kvcache/page_layout.h, dtype "bf16"), so that CPU and GPU workers can exchange pages.
//
// f32 -> bf16 rounds to nearest, ties to even, keeps subnormals, overflows to inf, and
// turns every NaN into the canonical NaN 0x7FFF: bit for bit what CUDA's
// __float2bfloat16_rn gives (its host code and the device's cvt.rn.bf16.f32), so a page
// the CPU writes holds the bytes a GPU would have written. (model/float_convert.h keeps
// PyTorch's rounding for model files, which differs only in the NaN it returns.)
// bf16 -> f32 is exact: a bf16 is the upper half of an f32.
#pragma once

#include <bit>
#include <cstdint>

namespace baton::cpu {

// One bf16 value's bits. A type of its own, so that bf16 pages cannot be taken for f16
// or for integers.
struct Bf16 {
  uint16_t bits = 0;
};
static_assert(sizeof(Bf16) == 2);

// Internal linkage: the per-ISA files include this header too, and must not share an
// inline function with the baseline-ISA files (matmul_internal.h explains why).
namespace {  // NOLINT(google-build-namespaces): one copy per file is the point.

inline float Bf16ToFloat(Bf16 b) { return std::bit_cast<float>(uint32_t{b.bits} << 16); }

// An element of f32 or bf16 pages as f32, for code templated on the element type.
inline float ToFloat(float x) { return x; }
inline float ToFloat(Bf16 x) { return Bf16ToFloat(x); }

inline Bf16 FloatToBf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return Bf16{0x7fff};
  // Adding 0x7fff rounds the dropped half up when it is above one half; the kept part's
  // lowest bit breaks the tie towards even. A carry into the exponent is the right result
  // (up to inf).
  return Bf16{static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16)};
}

}  // namespace

// out[i] = FloatToBf16(x[i]) for i < n, with AVX-512 where the CPU has it: the KV writes
// of every token and layer.
void FloatToBf16Row(const float* x, int64_t n, Bf16* out);

}  // namespace baton::cpu
