// MatMul's dispatcher, the scalar kernel and the row helpers. The SIMD kernels live in
// matmul_<isa>.cc, each compiled with its own -m flags (isa_flags.cmake).
#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/check.h"
#include "common/log.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/quant_blocks.h"

namespace baton::cpu {
namespace internal {

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  uint32_t bits = 0;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24 is exact in f32.
    float f = static_cast<float>(mant) * 0x1p-24f;
    std::memcpy(&bits, &f, sizeof(bits));
    bits |= sign;
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float out = 0;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}

namespace {

float Bf16ToFloat(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float out = 0;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}

uint16_t LoadU16(const uint8_t* p) {
  uint16_t v = 0;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

constexpr int kScalarLanes = 8;

// The scalar kernel keeps eight partial sums (element kk goes to kk % 8) and adds them
// in a fixed tree, like the SIMD kernels with their lanes; with -ffp-contract=off the
// multiply and the add round separately.
float ReduceLanes(const float* acc) {
  const float b0 = acc[0] + acc[4];
  const float b1 = acc[1] + acc[5];
  const float b2 = acc[2] + acc[6];
  const float b3 = acc[3] + acc[7];
  return (b0 + b2) + (b1 + b3);
}

template <DType kType>
float DotScalar(const float* x, const uint8_t* row, int64_t k) {
  float acc[kScalarLanes] = {};
  if constexpr (kType == DType::kQ8_0) {
    for (int64_t b = 0; b < k / 32; ++b) {
      const uint8_t* blk = row + b * 34;
      const float d = HalfToFloat(LoadU16(blk));
      const auto* qs = reinterpret_cast<const int8_t*>(blk + 2);
      for (int t = 0; t < 32; ++t) {
        const float w = static_cast<float>(qs[t]) * d;
        acc[t % kScalarLanes] += x[b * 32 + t] * w;
      }
    }
  } else {
    for (int64_t kk = 0; kk < k; ++kk) {
      float w = 0;
      if constexpr (kType == DType::kF32) {
        std::memcpy(&w, row + kk * 4, sizeof(w));
      } else if constexpr (kType == DType::kF16) {
        w = HalfToFloat(LoadU16(row + kk * 2));
      } else {
        w = Bf16ToFloat(LoadU16(row + kk * 2));
      }
      acc[kk % kScalarLanes] += x[kk] * w;
    }
  }
  return ReduceLanes(acc);
}

// Block-quantized weights: each row of W dequantized once, then the f32 dot product.
void GemmScalarDequantized(const GemmArgs& a, int64_t j0, int64_t j1) {
  float* w = ThreadScratch(static_cast<size_t>(a.k));
  for (int64_t j = j0; j < j1; ++j) {
    DequantizeBlocks(a.dtype, a.w + j * a.w_row_bytes, a.k, w);
    for (int64_t i = 0; i < a.m; ++i) {
      float s =
          DotScalar<DType::kF32>(a.x + i * a.x_stride, reinterpret_cast<const uint8_t*>(w), a.k);
      if (a.bias != nullptr) s += a.bias[j];
      a.y[i * a.y_stride + j] = s;
    }
  }
}

template <DType kType>
void GemmScalarT(const GemmArgs& a, int64_t j0, int64_t j1) {
  for (int64_t i = 0; i < a.m; ++i) {
    const float* x = a.x + i * a.x_stride;
    float* y = a.y + i * a.y_stride;
    for (int64_t j = j0; j < j1; ++j) {
      float s = DotScalar<kType>(x, a.w + j * a.w_row_bytes, a.k);
      if (a.bias != nullptr) s += a.bias[j];
      y[j] = s;
    }
  }
}

}  // namespace

void GemmScalar(const GemmArgs& a, int64_t j0, int64_t j1) {
  switch (a.dtype) {
    case DType::kF32:
      return GemmScalarT<DType::kF32>(a, j0, j1);
    case DType::kF16:
      return GemmScalarT<DType::kF16>(a, j0, j1);
    case DType::kBF16:
      return GemmScalarT<DType::kBF16>(a, j0, j1);
    case DType::kQ8_0:
      return GemmScalarT<DType::kQ8_0>(a, j0, j1);
    default:
      return GemmScalarDequantized(a, j0, j1);
  }
}

float* ThreadScratch(size_t n) {
  struct Aligned {
    float* p = nullptr;
    size_t size = 0;
    ~Aligned() { std::free(p); }
  };
  thread_local Aligned buf;
  if (buf.size < n) {
    std::free(buf.p);
    buf.size = (n + 15) / 16 * 16;
    buf.p = static_cast<float*>(std::aligned_alloc(64, buf.size * sizeof(float)));
    BATON_CHECK(buf.p != nullptr);
  }
  return buf.p;
}

const char* IsaName(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAvx512Bf16:
      return "avx512bf16";
  }
  return "?";
}

bool IsaSupported(Isa isa) {
  const CpuFeatures& f = GetCpuFeatures();
  const bool avx2 = f.avx2 && f.fma && f.f16c;
  const bool avx512 = avx2 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq;
  switch (isa) {
    case Isa::kScalar:
      return true;
    case Isa::kAvx2:
      return avx2;
    case Isa::kAvx512:
      return avx512;
    case Isa::kAvx512Bf16:
      return avx512 && f.avx512bf16;
  }
  return false;
}

namespace {

constexpr Isa kAllIsas[] = {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16};

Isa AutoIsa() {
  static const Isa isa = [] {
    Isa best = Isa::kScalar;
    for (Isa i : kAllIsas) {
      if (IsaSupported(i)) best = i;
    }
    const char* cap = std::getenv("BATON_CPU_ISA");
    if (cap != nullptr && *cap != '\0') {
      bool known = false;
      for (Isa i : kAllIsas) {
        if (std::strcmp(cap, IsaName(i)) == 0) {
          known = true;
          if (i < best) best = i;
        }
      }
      if (!known) {
        LogWarn(
            "baton: ignoring BATON_CPU_ISA=%s (want scalar, avx2, avx512 or "
            "avx512bf16)",
            cap);
      }
    }
    return best;
  }();
  return isa;
}

std::atomic<int> g_forced_isa{-1};

}  // namespace

Isa CurrentIsa() {
  const int forced = g_forced_isa.load(std::memory_order_relaxed);
  return forced >= 0 ? static_cast<Isa>(forced) : AutoIsa();
}

void SetIsaForTesting(Isa isa) {
  BATON_CHECK(IsaSupported(isa));
  g_forced_isa.store(static_cast<int>(isa), std::memory_order_relaxed);
}

void ResetIsaForTesting() { g_forced_isa.store(-1, std::memory_order_relaxed); }

}  // namespace internal

using internal::GemmArgs;
using internal::Isa;

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kF16:
      return "f16";
    case DType::kBF16:
      return "bf16";
    case DType::kQ8_0:
      return "q8_0";
    case DType::kQ4_0:
      return "q4_0";
    case DType::kQ4_1:
      return "q4_1";
    case DType::kQ5_0:
      return "q5_0";
    case DType::kQ5_1:
      return "q5_1";
    case DType::kQ2_K:
      return "q2_K";
    case DType::kQ3_K:
      return "q3_K";
    case DType::kQ4_K:
      return "q4_K";
    case DType::kQ5_K:
      return "q5_K";
    case DType::kQ6_K:
      return "q6_K";
  }
  return "?";
}

size_t RowBytes(DType dtype, int64_t cols) {
  BATON_CHECK(cols >= 0);
  const BlockLayout layout = LayoutOf(dtype);
  BATON_CHECK(cols % layout.elems == 0);
  return static_cast<size_t>(cols / layout.elems) * static_cast<size_t>(layout.bytes);
}

const char* ActiveIsa() { return internal::IsaName(internal::CurrentIsa()); }

void DequantizeRow(const MatrixRef& w, int64_t row, float* out) {
  BATON_CHECK(row >= 0 && row < w.rows);
  const auto* p = static_cast<const uint8_t*>(w.data) + RowBytes(w.dtype, w.cols) * row;
  switch (w.dtype) {
    case DType::kF32:
      std::memcpy(out, p, sizeof(float) * w.cols);
      return;
    case DType::kF16:
      for (int64_t c = 0; c < w.cols; ++c)
        out[c] = internal::HalfToFloat(internal::LoadU16(p + 2 * c));
      return;
    case DType::kBF16:
      for (int64_t c = 0; c < w.cols; ++c)
        out[c] = internal::Bf16ToFloat(internal::LoadU16(p + 2 * c));
      return;
    default:
      DequantizeBlocks(w.dtype, p, w.cols, out);
      return;
  }
}

namespace {

// Threads split the rows of W in units of kUnitRows (a multiple of every kernel's tile
// width, so only the last unit has an edge tile). A chunk gets at least kMinChunkMacs
// multiply-adds: below that, waking a worker costs more than it saves.
constexpr int64_t kUnitRows = 16;
constexpr int64_t kMinChunkMacs = int64_t{1} << 15;
// Rows of x below which a task is not split further by rows.
constexpr int64_t kMinRowsPerTask = 16;
constexpr int64_t kPrefillUnitsPerRange = 4;
constexpr int64_t kPrefillRangesPerThread = 16;

// bf16 copies of x for the avx512bf16 kernel; one per calling thread, kept between calls
// so a decode step does not allocate.
std::vector<uint16_t>& PackBuffer() {
  thread_local std::vector<uint16_t> buffer;
  return buffer;
}

// The kernel the dispatcher uses for `dtype` on the current ISA.
using GemmKernel = void (*)(const GemmArgs&, int64_t, int64_t);
GemmKernel KernelFor(DType dtype) {
  switch (internal::CurrentIsa()) {
    case Isa::kScalar:
      return internal::GemmScalar;
    case Isa::kAvx2:
      return internal::GemmAvx2;
    case Isa::kAvx512:
      return internal::GemmAvx512;
    case Isa::kAvx512Bf16:
      return dtype == DType::kBF16 ? internal::GemmAvx512Bf16 : internal::GemmAvx512;
  }
  return internal::GemmScalar;
}

// Runs fn over `units` units of W's rows (kUnitRows each) times m rows of x. Decode: the
// pool's usual 4 ranges per thread, none under kMinChunkMacs. Prefill (m >= 2 *
// kMinRowsPerTask): ranges of at least kPrefillUnitsPerRange units, up to 16 per thread,
// so that a thread done early waits less for the last range (each range still reuses a
// block of W for every row of x).
void ParallelOverUnits(ThreadPool* pool, int64_t units, int64_t k, int64_t m,
                       const std::function<void(int64_t, int64_t)>& fn) {
  if (m >= 2 * kMinRowsPerTask) {
    pool->ParallelFor(units, kPrefillUnitsPerRange, fn, kPrefillRangesPerThread);
    return;
  }
  const int64_t unit_macs = kUnitRows * k * m;
  pool->ParallelFor(units, std::max<int64_t>(1, kMinChunkMacs / std::max<int64_t>(unit_macs, 1)),
                    fn);
}

// x rounded to bf16 for the avx512bf16 kernel, in this thread's reused buffer; returns it
// and sets *stride (k padded to 32).
const uint16_t* PackX(const float* x, int64_t m, int64_t x_stride, int64_t k, ThreadPool* pool,
                      int64_t* stride) {
  *stride = (k + 31) / 32 * 32;
  std::vector<uint16_t>& buf = PackBuffer();
  // Rows start on cache lines (stride a multiple of 64 bytes): the kernel's 64-byte loads
  // of a row then never straddle two lines. 32 spare values for the alignment.
  if (buf.size() < static_cast<size_t>(m * *stride + 32)) buf.resize(m * *stride + 32);
  uint16_t* rows = buf.data() + (-(reinterpret_cast<uintptr_t>(buf.data()) / 2) & 31);
  // The lambda captures one pointer, so std::function keeps it inline.
  struct Pack {
    const float* x;
    int64_t x_stride, k, stride;
    uint16_t* out;
  } pk{x, x_stride, k, *stride, rows};
  auto pack = [p = &pk](int64_t r0, int64_t r1) {
    internal::PackBf16Avx512Bf16(p->x, p->x_stride, r0, r1, p->k, p->out, p->stride, p->stride);
  };
  const int64_t pack_grain = std::max<int64_t>(1, kMinChunkMacs / std::max<int64_t>(k, 1));
  if (pool != nullptr && m >= 2 * pack_grain) {
    pool->ParallelFor(m, pack_grain, pack);
  } else {
    pack(0, m);
  }
  return rows;
}

// x as the activation blocks of `dtype` (quant_dot.h) for GemmQ8K, in this thread's reused
// buffers (as PackX): sets a->xq or a->xq32, and a->xq_stride.
void QuantizeX(DType dtype, const float* x, int64_t m, int64_t x_stride, int64_t k,
               ThreadPool* pool, GemmArgs* a) {
  thread_local std::vector<Q8KBlock> buf;
  thread_local std::vector<Q8Block32> buf32;
  const bool k_quant = ActivationBlock(dtype) == kQ8KBlock;
  const int64_t stride = k / ActivationBlock(dtype);
  if (k_quant && buf.size() < static_cast<size_t>(m * stride)) buf.resize(m * stride);
  if (!k_quant && buf32.size() < static_cast<size_t>(m * stride)) buf32.resize(m * stride);
  a->xq_stride = stride;
  a->xq = k_quant ? buf.data() : nullptr;
  a->xq32 = k_quant ? nullptr : buf32.data();
  struct Quantize {
    const float* x;
    int64_t x_stride, k, stride;
    Q8KBlock* out;
    Q8Block32* out32;
  } q{x, x_stride, k, stride, k_quant ? buf.data() : nullptr, k_quant ? nullptr : buf32.data()};
  auto run = [p = &q](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      if (p->out != nullptr) {
        QuantizeRowQ8K(p->x + r * p->x_stride, p->k, p->out + r * p->stride);
      } else {
        QuantizeRowQ8Block32(p->x + r * p->x_stride, p->k, p->out32 + r * p->stride);
      }
    }
  };
  const int64_t grain = std::max<int64_t>(1, kMinChunkMacs / std::max<int64_t>(k, 1));
  if (pool != nullptr && m >= 2 * grain) {
    pool->ParallelFor(m, grain, run);
  } else {
    run(0, m);
  }
}

bool UsesInt8(const MatrixRef& w) {
  return w.int8_activations && HasInt8Product(w.dtype) && w.cols % ActivationBlock(w.dtype) == 0;
}

}  // namespace

void MatMul(const float* x, int64_t m, int64_t x_stride, const MatrixRef& w, const float* bias,
            float* y, int64_t y_stride, ThreadPool* pool) {
  const int64_t n = w.rows;
  const int64_t k = w.cols;
  BATON_CHECK(m >= 0 && n >= 0 && k >= 0);
  BATON_CHECK(m <= 1 || (x_stride >= k && y_stride >= n));
  if (m == 0 || n == 0) return;
  BATON_CHECK(x != nullptr && y != nullptr && (w.data != nullptr || k == 0));

  GemmArgs a;
  a.x = x;
  a.m = m;
  a.x_stride = x_stride;
  a.w = static_cast<const uint8_t*>(w.data);
  a.dtype = w.dtype;
  a.k = k;
  a.w_row_bytes = RowBytes(w.dtype, k);
  a.bias = bias;
  a.y = y;
  a.y_stride = y_stride;

  // The lambdas below capture one pointer, so std::function keeps them inline instead of
  // allocating on every call.
  struct Job {
    GemmArgs a;
    void (*kernel)(const GemmArgs&, int64_t, int64_t) = internal::GemmScalar;
    int64_t n = 0;
    int64_t m_blocks = 1;  // when rows of x are split too
    int64_t block_rows = 0;
  } job{a, KernelFor(w.dtype), n};
  if (UsesInt8(w)) {
    job.kernel = internal::GemmQ8K;
    QuantizeX(w.dtype, x, m, x_stride, k, pool, &job.a);
  } else if (job.kernel == internal::GemmAvx512Bf16) {
    job.a.xb = PackX(x, m, x_stride, k, pool, &job.a.xb_stride);
  }

  const int64_t units = (n + kUnitRows - 1) / kUnitRows;
  const int threads = pool != nullptr ? pool->num_threads() : 1;
  if (pool == nullptr || units >= 4 * threads || m < 2 * kMinRowsPerTask) {
    // Threads split W's rows only: each streams its share of W once.
    auto run = [j = &job](int64_t u0, int64_t u1) {
      j->kernel(j->a, u0 * kUnitRows, std::min(u1 * kUnitRows, j->n));
    };
    if (pool != nullptr) {
      ParallelOverUnits(pool, units, k, m, run);
    } else {
      run(0, units);
    }
    return;
  }
  // Too few rows of W for the threads (a small matrix in prefill): split the rows of x
  // as well. Tasks are (unit, row block) pairs, unit-major, so a thread keeps its rows of
  // W in cache across the row blocks. No element's arithmetic depends on this.
  job.m_blocks = std::min<int64_t>(m / kMinRowsPerTask, (4 * threads + units - 1) / units);
  job.block_rows = (m + job.m_blocks - 1) / job.m_blocks;
  job.m_blocks = (m + job.block_rows - 1) / job.block_rows;
  auto run_tasks = [j = &job](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t u = t / j->m_blocks;
      const int64_t i0 = (t % j->m_blocks) * j->block_rows;
      GemmArgs a = j->a;
      a.m = std::min(j->block_rows, j->a.m - i0);
      a.x += i0 * a.x_stride;
      if (a.xb != nullptr) a.xb += i0 * a.xb_stride;
      if (a.xq != nullptr) a.xq += i0 * a.xq_stride;
      if (a.xq32 != nullptr) a.xq32 += i0 * a.xq_stride;
      a.y += i0 * a.y_stride;
      j->kernel(a, u * kUnitRows, std::min((u + 1) * kUnitRows, j->n));
    }
  };
  pool->ParallelFor(units * job.m_blocks, 1, run_tasks);
}

void MatMulShared(const float* x, int64_t m, int64_t x_stride,
                  std::span<const MatMulTarget> targets, ThreadPool* pool) {
  if (targets.empty() || m == 0) return;
  const int threads = pool != nullptr ? pool->num_threads() : 1;
  const int64_t k = targets[0].w.cols;
  const DType dtype = targets[0].w.dtype;
  // Fused only where every target would split W's rows alone (always in decode); else one
  // MatMul each, which is the same arithmetic.
  bool fuse = targets.size() > 1 && targets.size() <= 4 && pool != nullptr;
  for (const MatMulTarget& t : targets) {
    const int64_t units = (t.w.rows + kUnitRows - 1) / kUnitRows;
    fuse = fuse && t.w.cols == k && t.w.dtype == dtype && UsesInt8(t.w) == UsesInt8(targets[0].w) &&
           t.w.rows > 0 && (units >= 4 * threads || m < 2 * kMinRowsPerTask) &&
           (m <= 1 || (x_stride >= k && t.y_stride >= t.w.rows));
  }
  if (!fuse) {
    for (const MatMulTarget& t : targets)
      MatMul(x, m, x_stride, t.w, t.bias, t.y, t.y_stride, pool);
    return;
  }
  BATON_CHECK(x != nullptr);

  const bool int8 = UsesInt8(targets[0].w);
  const GemmKernel kernel = int8 ? internal::GemmQ8K : KernelFor(dtype);
  const uint16_t* xb = nullptr;
  int64_t xb_stride = 0;
  if (kernel == internal::GemmAvx512Bf16) xb = PackX(x, m, x_stride, k, pool, &xb_stride);
  GemmArgs quantized;
  if (int8) QuantizeX(dtype, x, m, x_stride, k, pool, &quantized);

  struct Fused {
    GemmArgs a[4];
    int64_t first_unit[5] = {0, 0, 0, 0, 0};
    int count = 0;
    GemmKernel kernel = nullptr;
  } f;
  f.kernel = kernel;
  f.count = static_cast<int>(targets.size());
  for (int i = 0; i < f.count; ++i) {
    const MatMulTarget& t = targets[i];
    GemmArgs& a = f.a[i];
    a.x = x;
    a.m = m;
    a.x_stride = x_stride;
    a.xb = xb;
    a.xb_stride = xb_stride;
    a.xq = quantized.xq;
    a.xq32 = quantized.xq32;
    a.xq_stride = quantized.xq_stride;
    a.w = static_cast<const uint8_t*>(t.w.data);
    a.dtype = dtype;
    a.k = k;
    a.w_row_bytes = RowBytes(dtype, k);
    a.bias = t.bias;
    a.y = t.y;
    a.y_stride = t.y_stride;
    f.first_unit[i + 1] = f.first_unit[i] + (t.w.rows + kUnitRows - 1) / kUnitRows;
  }
  auto run = [p = &f, &targets](int64_t u0, int64_t u1) {
    for (int i = 0; i < p->count; ++i) {
      const int64_t lo = std::max(u0, p->first_unit[i]), hi = std::min(u1, p->first_unit[i + 1]);
      if (lo >= hi) continue;
      const int64_t base = p->first_unit[i];
      p->kernel(p->a[i], (lo - base) * kUnitRows,
                std::min((hi - base) * kUnitRows, targets[i].w.rows));
    }
  };
  ParallelOverUnits(pool, f.first_unit[f.count], k, m, run);
}

}  // namespace baton::cpu
