// Dequantization of ggml's block-quantized types, one block at a time. Included by
// quant_blocks.cc (the reference every test compares with) and by the SIMD matmul files,
// which dequantize rows of W into f32 scratch; every name has internal linkage, so each
// includer gets its own copy compiled with its own flags (matmul_internal.h says why).
//
// The arithmetic is ggml's to_float, operation for operation, so the values match
// llama.cpp's bit for bit: a scale is an f16 widened exactly, products such as
// (d * sc) * q are exact in f32 for every type but Q6_K, and a minimum is subtracted
// after the product (these files are compiled with -ffp-contract=off, so no fused
// multiply-add changes a rounding).
//
// Layouts (little-endian; "f16" is an IEEE half), 32 elements per block for the legacy
// types and 256 (one "super-block") for the K-quants:
//   Q4_0  18 B: f16 d, 16 B nibbles             x = d * (q - 8)
//   Q4_1  20 B: f16 d, f16 m, 16 B nibbles      x = d * q + m
//   Q5_0  22 B: f16 d, u32 high bits, 16 B      x = d * (q - 16)
//   Q5_1  24 B: f16 d, f16 m, u32 high bits, 16 B  x = d * q + m
//   Q2_K  84 B: 16 B scales (4-bit scale, 4-bit min per 16), 64 B 2-bit q, f16 d, f16 dmin
//   Q3_K 110 B: 32 B high-bit mask, 64 B 2-bit q, 12 B 6-bit scales, f16 d
//   Q4_K 144 B: f16 d, f16 dmin, 12 B 6-bit scales and mins per 32, 128 B nibbles
//   Q5_K 176 B: f16 d, f16 dmin, 12 B scales/mins, 32 B high bits, 128 B nibbles
//   Q6_K 210 B: 128 B low nibbles, 64 B 2-bit highs, 16 int8 scales, f16 d
// The nibbles of a 32-element legacy block: byte j holds element j (low) and j + 16 (high).
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/quant_blocks.h"

namespace baton::cpu::internal {
namespace {  // NOLINT(google-build-namespaces): one copy per including file is the point.

inline float HalfAt(const uint8_t* p) {
  uint16_t h = 0;
  std::memcpy(&h, p, sizeof(h));
  return HalfToFloat(h);
}

inline uint32_t U32At(const uint8_t* p) {
  uint32_t v = 0;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

inline void DequantQ4_0(const uint8_t* __restrict b, float* __restrict y) {
  const float d = HalfAt(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>((qs[j] & 0x0f) - 8) * d;
    y[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
  }
}

inline void DequantQ4_1(const uint8_t* __restrict b, float* __restrict y) {
  const float d = HalfAt(b), m = HalfAt(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>(qs[j] & 0x0f) * d + m;
    y[j + 16] = static_cast<float>(qs[j] >> 4) * d + m;
  }
}

inline void DequantQ5_0(const uint8_t* __restrict b, float* __restrict y) {
  const float d = HalfAt(b);
  const uint32_t qh = U32At(b + 2);
  const uint8_t* qs = b + 6;
  for (int j = 0; j < 16; ++j) {
    const int hi0 = static_cast<int>((qh >> j) << 4 & 0x10);
    const int hi1 = static_cast<int>((qh >> (j + 12)) & 0x10);
    y[j] = static_cast<float>(((qs[j] & 0x0f) | hi0) - 16) * d;
    y[j + 16] = static_cast<float>(((qs[j] >> 4) | hi1) - 16) * d;
  }
}

inline void DequantQ5_1(const uint8_t* __restrict b, float* __restrict y) {
  const float d = HalfAt(b), m = HalfAt(b + 2);
  const uint32_t qh = U32At(b + 4);
  const uint8_t* qs = b + 8;
  for (int j = 0; j < 16; ++j) {
    const int hi0 = static_cast<int>((qh >> j) << 4 & 0x10);
    const int hi1 = static_cast<int>((qh >> (j + 12)) & 0x10);
    y[j] = static_cast<float>((qs[j] & 0x0f) | hi0) * d + m;
    y[j + 16] = static_cast<float>((qs[j] >> 4) | hi1) * d + m;
  }
}

inline void DequantQ8_0(const uint8_t* __restrict b, float* __restrict y) {
  const float d = HalfAt(b);
  const auto* qs = reinterpret_cast<const int8_t*>(b + 2);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(qs[j]) * d;
}

inline void DequantQ2_K(const uint8_t* __restrict b, float* __restrict y) {
  const uint8_t* scales = b;
  const float d = HalfAt(b + 80), dmin = HalfAt(b + 82);
  // Each half of 128 values reads 32 bytes of 2-bit quants four times (bits 2j); each
  // pass gives two runs of 16 values with their own 4-bit scale and minimum.
  for (int half = 0; half < 2; ++half) {
    const uint8_t* q = b + 16 + 32 * half;
    for (int j = 0; j < 4; ++j) {
      for (int part = 0; part < 2; ++part) {
        const uint8_t sc = scales[8 * half + 2 * j + part];
        const float dl = d * static_cast<float>(sc & 0x0f);
        const float ml = dmin * static_cast<float>(sc >> 4);
        const uint8_t* qp = q + 16 * part;
        float* out = y + 128 * half + 32 * j + 16 * part;
        const int shift = 2 * j;
        for (int l = 0; l < 16; ++l) out[l] = dl * static_cast<float>((qp[l] >> shift) & 3) - ml;
      }
    }
  }
}

// The 16 6-bit scales of a Q3_K block, unpacked from 12 bytes: the low 4 bits of scale i
// are the low nibbles of bytes 0-7 (i < 8) or their high nibbles (i >= 8); the high 2
// bits are bits 2 * (i / 4) of byte 8 + i % 4. Stored biased by 32.
inline void Q3Scales(const uint8_t* packed, int (&out)[16]) {
  for (int i = 0; i < 16; ++i) {
    const int low = i < 8 ? packed[i] & 0x0f : packed[i - 8] >> 4;
    const int high = (packed[8 + i % 4] >> (2 * (i / 4))) & 3;
    out[i] = (low | high << 4) - 32;
  }
}

inline void DequantQ3_K(const uint8_t* __restrict b, float* __restrict y) {
  const uint8_t* hmask = b;
  const uint8_t* q = b + 32;
  int scales[16];
  Q3Scales(b + 96, scales);
  const float d = HalfAt(b + 108);
  int is = 0;
  uint8_t m = 1;
  for (int half = 0; half < 2; ++half, q += 32) {
    for (int shift = 0; shift < 8; shift += 2, m = static_cast<uint8_t>(m << 1)) {
      for (int part = 0; part < 2; ++part) {
        const float dl = d * static_cast<float>(scales[is++]);
        for (int l = 16 * part; l < 16 * part + 16; ++l) {
          const int v = ((q[l] >> shift) & 3) - ((hmask[l] & m) != 0 ? 0 : 4);
          *y++ = dl * static_cast<float>(v);
        }
      }
    }
  }
}

// Scale and minimum j (of 8, 6 bits each) of a Q4_K or Q5_K block's 12 packed bytes.
inline void ScaleMinK4(int j, const uint8_t* q, int* sc, int* mn) {
  if (j < 4) {
    *sc = q[j] & 63;
    *mn = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
    *mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

inline void DequantQ4_K(const uint8_t* __restrict b, float* __restrict y) {
  const float d = HalfAt(b), dmin = HalfAt(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* q = b + 16;
  for (int is = 0; is < 8; is += 2, q += 32) {
    int sc = 0, mn = 0;
    ScaleMinK4(is, scales, &sc, &mn);
    const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(mn);
    ScaleMinK4(is + 1, scales, &sc, &mn);
    const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(mn);
    for (int l = 0; l < 32; ++l) y[l] = d1 * static_cast<float>(q[l] & 0x0f) - m1;
    for (int l = 0; l < 32; ++l) y[l + 32] = d2 * static_cast<float>(q[l] >> 4) - m2;
    y += 64;
  }
}

inline void DequantQ5_K(const uint8_t* __restrict b, float* __restrict y) {
  const float d = HalfAt(b), dmin = HalfAt(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* ql = b + 48;
  int u1 = 1, u2 = 2;
  for (int is = 0; is < 8; is += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
    int sc = 0, mn = 0;
    ScaleMinK4(is, scales, &sc, &mn);
    const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(mn);
    ScaleMinK4(is + 1, scales, &sc, &mn);
    const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(mn);
    for (int l = 0; l < 32; ++l) {
      y[l] = d1 * static_cast<float>((ql[l] & 0x0f) + ((qh[l] & u1) != 0 ? 16 : 0)) - m1;
    }
    for (int l = 0; l < 32; ++l) {
      y[l + 32] = d2 * static_cast<float>((ql[l] >> 4) + ((qh[l] & u2) != 0 ? 16 : 0)) - m2;
    }
    y += 64;
  }
}

inline void DequantQ6_K(const uint8_t* __restrict b, float* __restrict y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = HalfAt(b + 208);
  // Element 32 * part + l of each half of 128 takes its low nibble from ql (bytes l or
  // l + 32, low or high half) and its top 2 bits from qh[l] (bits 2 * part); one loop per
  // part so that each vectorizes.
  for (int half = 0; half < 2; ++half, ql += 64, qh += 32, sc += 8, y += 128) {
    for (int part = 0; part < 4; ++part) {
      const uint8_t* low = ql + (part & 1) * 32;
      const int low_shift = (part >> 1) * 4;
      const int high_shift = 2 * part;
      for (int g = 0; g < 2; ++g) {
        // (d * scale) * q, in that order, as ggml rounds it.
        const float ds = d * static_cast<float>(sc[g + 2 * part]);
        for (int l = 16 * g; l < 16 * g + 16; ++l) {
          const int q = (((low[l] >> low_shift) & 0x0f) | (((qh[l] >> high_shift) & 3) << 4)) - 32;
          y[32 * part + l] = ds * static_cast<float>(q);
        }
      }
    }
  }
}

template <DType kType>
void DequantBlock(const uint8_t* b, float* y) {
  if constexpr (kType == DType::kQ4_0) DequantQ4_0(b, y);
  if constexpr (kType == DType::kQ4_1) DequantQ4_1(b, y);
  if constexpr (kType == DType::kQ5_0) DequantQ5_0(b, y);
  if constexpr (kType == DType::kQ5_1) DequantQ5_1(b, y);
  if constexpr (kType == DType::kQ8_0) DequantQ8_0(b, y);
  if constexpr (kType == DType::kQ2_K) DequantQ2_K(b, y);
  if constexpr (kType == DType::kQ3_K) DequantQ3_K(b, y);
  if constexpr (kType == DType::kQ4_K) DequantQ4_K(b, y);
  if constexpr (kType == DType::kQ5_K) DequantQ5_K(b, y);
  if constexpr (kType == DType::kQ6_K) DequantQ6_K(b, y);
}

template <DType kType>
void DequantEach(const uint8_t* src, int64_t n, float* y) {
  constexpr BlockLayout kLayout = LayoutOf(kType);
  for (int64_t i = 0; i < n / kLayout.elems; ++i) {
    DequantBlock<kType>(src + i * kLayout.bytes, y + i * kLayout.elems);
  }
}

// n values (whole blocks) of `dtype`, a block-quantized type, to f32.
inline void DequantValues(DType dtype, const uint8_t* src, int64_t n, float* y) {
  switch (dtype) {
    case DType::kQ4_0:
      return DequantEach<DType::kQ4_0>(src, n, y);
    case DType::kQ4_1:
      return DequantEach<DType::kQ4_1>(src, n, y);
    case DType::kQ5_0:
      return DequantEach<DType::kQ5_0>(src, n, y);
    case DType::kQ5_1:
      return DequantEach<DType::kQ5_1>(src, n, y);
    case DType::kQ8_0:
      return DequantEach<DType::kQ8_0>(src, n, y);
    case DType::kQ2_K:
      return DequantEach<DType::kQ2_K>(src, n, y);
    case DType::kQ3_K:
      return DequantEach<DType::kQ3_K>(src, n, y);
    case DType::kQ4_K:
      return DequantEach<DType::kQ4_K>(src, n, y);
    case DType::kQ5_K:
      return DequantEach<DType::kQ5_K>(src, n, y);
    case DType::kQ6_K:
      return DequantEach<DType::kQ6_K>(src, n, y);
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
      return;
  }
}

}  // namespace
}  // namespace baton::cpu::internal
