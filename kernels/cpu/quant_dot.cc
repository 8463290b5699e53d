#include "kernels/cpu/quant_dot.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>

#include "common/check.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/quant_dot_inl.h"

namespace baton::cpu {
namespace internal {

uint16_t FloatToHalf(float f) {
  uint32_t x = 0;
  std::memcpy(&x, &f, sizeof(x));
  const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u);
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // 65520 and up round to infinity
  if (abs < 0x38800000u) {
    // Below 2^-14: a multiple of 2^-24, the subnormal step (scaling by 2^24 is exact).
    float v = 0;
    std::memcpy(&v, &abs, sizeof(v));
    return sign | static_cast<uint16_t>(std::nearbyint(v * 16777216.0f));
  }
  const uint32_t h = abs - 0x38000000u;  // exponent rebased from 127 to 15
  return sign | static_cast<uint16_t>((h + 0xfffu + ((h >> 13) & 1u)) >> 13);
}

namespace {

// v rounded to the nearest integer, ties to even (the default mode), as vcvtps2dq rounds:
// INT_MIN for NaN and out of int's range, where a plain cast would be undefined.
int RoundToInt(float v) {
  const float r = std::nearbyint(v);
  return r >= -2147483648.0f && r < 2147483648.0f ? static_cast<int>(r) : INT_MIN;
}

// The low byte of v, as the SIMD quantizer stores it.
int8_t LowByte(int v) { return static_cast<int8_t>(static_cast<uint32_t>(v) & 0xffu); }

// The plain loops (quant_dot_inl.h) per block, then the block's f32 part in AddBlockK's
// order.
float DotPlain(DType dtype, const uint8_t* row, const Q8KBlock* x, int64_t blocks) {
  const size_t bytes = static_cast<size_t>(LayoutOf(dtype).bytes);
  KSums sums;
  for (int64_t i = 0; i < blocks; ++i) {
    int32_t sumi = 0, summins = 0;
    const uint8_t* b = row + i * bytes;
    BlockSumsPlain(dtype, b, x + i, 1, &sumi, &summins);
    if (dtype == DType::kQ6_K) {
      AddBlockK(&sums, i, x[i].d, HalfAt(b + 208), 0.0f, sumi, 0);
    } else {
      AddBlockK(&sums, i, x[i].d, HalfAt(b), HalfAt(b + 2), sumi, summins);
    }
  }
  return FinishK(sums.d, sums.m);
}

void DotRows(DType dtype, const uint8_t* row, const Q8KBlock* const* x, int rows, int64_t blocks,
             float* out) {
  switch (CurrentIsa()) {
    case Isa::kScalar:
      for (int r = 0; r < rows; ++r) out[r] = DotPlain(dtype, row, x[r], blocks);
      return;
    case Isa::kAvx2:
      return DotRowsAvx2(dtype, row, x, rows, blocks, out);
    case Isa::kAvx512:
    case Isa::kAvx512Bf16:
      return DotRowsAvx512(dtype, row, x, rows, blocks, out);
  }
}

void DotRowsLegacy(DType dtype, const uint8_t* row, const Q8Block32* const* x, int rows,
                   int64_t blocks, float* out) {
  switch (CurrentIsa()) {
    case Isa::kScalar:
      for (int r = 0; r < rows; ++r) out[r] = DotLegacyPlain(dtype, row, x[r], blocks);
      return;
    case Isa::kAvx2:
      return DotRowsLegacyAvx2(dtype, row, x, rows, blocks, out);
    case Isa::kAvx512:
    case Isa::kAvx512Bf16:
      return DotRowsLegacyAvx512(dtype, row, x, rows, blocks, out);
  }
}

// Weight rows `row` and `row + row_bytes` times one row of x: out[0..1].
void DotRowPairLegacy(DType dtype, const uint8_t* row, size_t row_bytes, const Q8Block32* x,
                      int64_t blocks, float out[2]) {
  switch (CurrentIsa()) {
    case Isa::kScalar:
      out[0] = DotLegacyPlain(dtype, row, x, blocks);
      out[1] = DotLegacyPlain(dtype, row + row_bytes, x, blocks);
      return;
    case Isa::kAvx2:
      return DotRowPairLegacyAvx2(dtype, row, row_bytes, x, blocks, out);
    case Isa::kAvx512:
    case Isa::kAvx512Bf16:
      return DotRowPairLegacyAvx512(dtype, row, row_bytes, x, blocks, out);
  }
}

// Which tiled kernel y[:, j0:j1) goes through: only where there are rows enough to pay for
// unpacking W (prefill); each gives the same bits as the row-by-row ones.
enum class Tiles { kNone, kAvx512Vnni, kAvx2 };
Tiles TilesFor(const GemmArgs& a) {
  constexpr int64_t kMinRows = 16;
  const Isa isa = CurrentIsa();
  if (a.m < kMinRows || isa == Isa::kScalar) return Tiles::kNone;
  if (isa != Isa::kAvx2 && GetCpuFeatures().avx512vnni) return Tiles::kAvx512Vnni;
  return Tiles::kAvx2;
}

}  // namespace

void GemmQ8K(const GemmArgs& a, int64_t j0, int64_t j1) {
  const bool k_quant = a.xq != nullptr;
  const int64_t blocks = a.k / (k_quant ? kQ8KBlock : kQ8Block32);
  switch (TilesFor(a)) {
    case Tiles::kAvx512Vnni:
      for (; j0 + 16 <= j1; j0 += 16) TileQ8KAvx512Vnni(a, j0);
      break;
    case Tiles::kAvx2:
      for (; j0 + 16 <= j1 && TileQ8Avx2(a, j0); j0 += 16) {
      }
      break;
    case Tiles::kNone:
      break;
  }
  if (j0 == j1) return;
  // Tiles of 16 rows of W by 4 rows of x: each decoded block of W meets 4 rows of x, and
  // the 16 rows of W (1-3 KiB each for k = 2048) stay in L1/L2 across the rows of x.
  constexpr int64_t kTile = 16;
  constexpr int kRows = 4;
  for (int64_t jt = j0; jt < j1; jt += kTile) {
    const int64_t je = std::min(j1, jt + kTile);
    for (int64_t i = 0; i < a.m; i += kRows) {
      const int rows = static_cast<int>(std::min<int64_t>(kRows, a.m - i));
      const Q8KBlock* x[kRows];
      const Q8Block32* x32[kRows];
      for (int r = 0; r < rows; ++r) {
        if (k_quant) x[r] = a.xq + (i + r) * a.xq_stride;
        if (!k_quant) x32[r] = a.xq32 + (i + r) * a.xq_stride;
      }
      int64_t j = jt;
      if (rows == 1 && (a.dtype == DType::kQ4_0 || a.dtype == DType::kQ5_0)) {
        // One row of x (decode) and a type with an offset: weight rows two at a time,
        // sharing the activations' scales and sums (AVX2, one thread, k = 576: 2.15 -> 1.43
        // ns per Q4_0 block, 2.40 -> 1.80 per Q5_0). Not Q8_0: 20% slower in pairs.
        for (; j + 2 <= je; j += 2) {
          float v[2];
          DotRowPairLegacy(a.dtype, a.w + j * a.w_row_bytes, a.w_row_bytes, x32[0], blocks, v);
          for (int w = 0; w < 2; ++w) {
            a.y[i * a.y_stride + j + w] = a.bias != nullptr ? v[w] + a.bias[j + w] : v[w];
          }
        }
      }
      for (; j < je; ++j) {
        float v[kRows];
        if (k_quant) {
          DotRows(a.dtype, a.w + j * a.w_row_bytes, x, rows, blocks, v);
        } else {
          DotRowsLegacy(a.dtype, a.w + j * a.w_row_bytes, x32, rows, blocks, v);
        }
        for (int r = 0; r < rows; ++r) {
          a.y[(i + r) * a.y_stride + j] = a.bias != nullptr ? v[r] + a.bias[j] : v[r];
        }
      }
    }
  }
}

}  // namespace internal

bool HasInt8Product(DType dtype) { return ActivationBlock(dtype) != 0; }

int ActivationBlock(DType dtype) {
  switch (dtype) {
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
      return kQ8KBlock;
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ5_0:
    case DType::kQ4_1:
    case DType::kQ5_1:
      return kQ8Block32;
    default:
      return 0;
  }
}

void QuantizeRowQ8K(const float* x, int64_t k, Q8KBlock* out) {
  BATON_CHECK(k % kQ8KBlock == 0);
  if (internal::CurrentIsa() != internal::Isa::kScalar) {
    return internal::QuantizeRowQ8KAvx2(x, k, out);
  }
  for (int64_t b = 0; b < k / kQ8KBlock; ++b, x += kQ8KBlock) {
    Q8KBlock& q = out[b];
    float amax = 0, max = 0;
    for (int j = 0; j < kQ8KBlock; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    if (amax == 0) {
      q = Q8KBlock{};
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < kQ8KBlock; ++j) {
      // Round half to even, as ggml's nearest_int (the default rounding mode).
      q.qs[j] = internal::LowByte(std::min(127, internal::RoundToInt(iscale * x[j])));
    }
    for (int g = 0; g < kQ8KBlock / 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += q.qs[16 * g + j];
      q.bsums[g] = static_cast<int16_t>(sum);
    }
    q.d = 1.0f / iscale;
  }
}

void QuantizeRowQ8Block32(const float* x, int64_t k, Q8Block32* out) {
  BATON_CHECK(k % kQ8Block32 == 0);
  if (internal::CurrentIsa() != internal::Isa::kScalar) {
    return internal::QuantizeRowQ8Block32Avx2(x, k, out);
  }
  for (int64_t b = 0; b < k / kQ8Block32; ++b, x += kQ8Block32) {
    Q8Block32& q = out[b];
    float amax = 0;
    for (int j = 0; j < kQ8Block32; ++j) amax = std::max(amax, std::fabs(x[j]));
    // ggml's x86 quantize_row_q8_0/q8_1: d = max / 127 (kept as f16), q = x * (127 / max)
    // rounded to nearest even.
    const float d = amax / 127.0f;
    const float id = amax != 0 ? 127.0f / amax : 0.0f;
    int32_t sum = 0;
    for (int j = 0; j < kQ8Block32; ++j) {
      q.qs[j] = internal::LowByte(internal::RoundToInt(x[j] * id));
      sum += q.qs[j];
    }
    q.sum = sum;
    q.d = internal::HalfToFloat(internal::FloatToHalf(d));
    q.s = internal::HalfToFloat(internal::FloatToHalf(d * static_cast<float>(sum)));
  }
}

float DotQ8Block32(DType dtype, const uint8_t* w_row, const Q8Block32* x, int64_t blocks) {
  BATON_CHECK(ActivationBlock(dtype) == kQ8Block32);
  float out = 0;
  internal::DotRowsLegacy(dtype, w_row, &x, 1, blocks, &out);
  return out;
}

float DotQ8K(DType dtype, const uint8_t* w_row, const Q8KBlock* x, int64_t blocks) {
  BATON_CHECK(ActivationBlock(dtype) == kQ8KBlock);
  float out = 0;
  internal::DotRows(dtype, w_row, &x, 1, blocks, &out);
  return out;
}

}  // namespace baton::cpu
