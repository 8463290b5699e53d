#include "bench/cpu_probes.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "common/check.h"
#include "kernels/cpu/cpu_features.h"

namespace baton::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kReadWindowBytes = size_t{64} << 20;

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

std::unique_ptr<uint8_t[], FreeDeleter> AllocAligned(size_t bytes) {
  const size_t rounded = (bytes + 63) / 64 * 64;
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(64, std::max<size_t>(rounded, 64)));
  BATON_CHECK(p != nullptr);
  return std::unique_ptr<uint8_t[], FreeDeleter>(p);
}

// Sums of 64-bit lanes over `streams` equal parts of [p, p + bytes) read side by side
// (and the rest, if any, alone); the result only keeps the loads from being optimised
// away. One sequential stream per thread does not reach the memory bandwidth on every
// machine; several, like the rows a decode kernel reads at once, can (too many thrash). `p` is
// 64-byte aligned and `bytes` a multiple of 256.
#if defined(__x86_64__)
__attribute__((target("avx512f"))) uint64_t SumAvx512(const uint8_t* p, size_t bytes, int streams) {
  const size_t part = bytes / streams / 128 * 128;
  __m512i a0 = _mm512_setzero_si512(), a1 = a0;
  for (size_t off = 0; off < part; off += 128) {
    for (int s = 0; s < streams; ++s) {
      a0 = _mm512_add_epi64(a0, _mm512_load_si512(p + s * part + off));
      a1 = _mm512_add_epi64(a1, _mm512_load_si512(p + s * part + off + 64));
    }
  }
  for (size_t off = part * streams; off < bytes; off += 64) {
    a0 = _mm512_add_epi64(a0, _mm512_load_si512(p + off));
  }
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(lanes, _mm512_add_epi64(a0, a1));
  uint64_t sum = 0;
  for (uint64_t v : lanes) sum += v;
  return sum;
}

__attribute__((target("avx2"))) uint64_t SumAvx2(const uint8_t* p, size_t bytes, int streams) {
  const size_t part = bytes / streams / 128 * 128;
  __m256i a0 = _mm256_setzero_si256(), a1 = a0;
  for (size_t off = 0; off < part; off += 64) {
    for (int s = 0; s < streams; ++s) {
      const uint8_t* q = p + s * part + off;
      a0 = _mm256_add_epi64(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(q)));
      a1 = _mm256_add_epi64(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(q + 32)));
    }
  }
  for (size_t off = part * streams; off < bytes; off += 32) {
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + off)));
  }
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), _mm256_add_epi64(a0, a1));
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}
#endif

uint64_t SumPortable(const uint8_t* p, size_t bytes, int streams) {
  const size_t part = bytes / streams / 64 * 64;
  uint64_t sum = 0;
  for (size_t off = 0; off < part; off += 8) {
    for (int s = 0; s < streams; ++s) {
      uint64_t v = 0;
      std::memcpy(&v, p + s * part + off, 8);
      sum += v;
    }
  }
  for (size_t off = part * streams; off < bytes; off += 8) {
    uint64_t v = 0;
    std::memcpy(&v, p + off, 8);
    sum += v;
  }
  return sum;
}

uint64_t SumBytes(const uint8_t* p, size_t bytes, int streams) {
#if defined(__x86_64__)
  const cpu::CpuFeatures& f = cpu::GetCpuFeatures();
  if (f.avx512f) return SumAvx512(p, bytes, streams);
  if (f.avx2) return SumAvx2(p, bytes, streams);
#endif
  return SumPortable(p, bytes, streams);
}

// splitmix64: fast enough to fill a gigabyte.
struct Rng {
  uint64_t state;
  uint64_t Next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [-1, 1).
  float Unit() {
    return static_cast<float>(static_cast<int64_t>(Next() >> 40) - (1 << 23)) * 0x1p-23f;
  }
};

// A normal f16 of magnitude in [2^-6, 2^0), random sign and mantissa.
uint16_t RandomHalf(Rng& rng) {
  const uint64_t r = rng.Next();
  const auto exp = static_cast<uint16_t>(9 + (r % 6));
  return static_cast<uint16_t>(((r >> 8) & 0x8000) | (exp << 10) | ((r >> 20) & 0x3ff));
}

}  // namespace

void FillRandomWeights(cpu::DType dtype, int64_t cols, void* data, size_t bytes, uint64_t seed) {
  Rng rng{seed};
  auto* p = static_cast<uint8_t*>(data);
  switch (dtype) {
    case cpu::DType::kF32:
      for (size_t off = 0; off + 4 <= bytes; off += 4) {
        const float v = rng.Unit();
        std::memcpy(p + off, &v, 4);
      }
      return;
    case cpu::DType::kF16:
      for (size_t off = 0; off + 2 <= bytes; off += 2) {
        const uint16_t h = RandomHalf(rng);
        std::memcpy(p + off, &h, 2);
      }
      return;
    case cpu::DType::kBF16:
      for (size_t off = 0; off + 2 <= bytes; off += 2) {
        const float v = rng.Unit();
        uint32_t bits = 0;
        std::memcpy(&bits, &v, 4);
        const auto h = static_cast<uint16_t>(bits >> 16);
        std::memcpy(p + off, &h, 2);
      }
      return;
    case cpu::DType::kQ8_0: {
      BATON_CHECK(cols % 32 == 0);
      for (size_t off = 0; off + 34 <= bytes; off += 34) {
        const uint16_t d = static_cast<uint16_t>(0x2000 | (rng.Next() & 0x3ff));  // ~2^-7
        std::memcpy(p + off, &d, 2);
        for (int t = 0; t < 32; t += 8) {
          const uint64_t q = rng.Next();
          std::memcpy(p + off + 2 + t, &q, 8);
        }
      }
      return;
    }
  }
}

ReadBandwidth MeasureReadBandwidth(ThreadPool* pool, size_t bytes, int reps) {
  constexpr size_t kPage = 4096;
  bytes = std::max<size_t>(bytes / kPage * kPage, kPage);
  auto buffer = AllocAligned(bytes);
  const auto pages = static_cast<int64_t>(bytes / kPage);
  uint8_t* base = buffer.get();
  // First touch by the threads that read, page by page, with nonzero data.
  pool->ParallelFor(pages, 1, [base](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p)
      std::memset(base + p * kPage, static_cast<int>(p & 0xff) | 1, kPage);
  });
  // Timed in windows, each reading memory last touched a whole buffer ago. Windows take
  // turns at one, four and eight streams per thread.
  constexpr int kStreams[] = {1, 4, 8};
  constexpr int kPatterns = 3;
  const int64_t window_pages = std::min<int64_t>(pages, int64_t{kReadWindowBytes / kPage});
  std::atomic<uint64_t> sink{0};
  std::vector<double> windows[kPatterns];
  for (int rep = 0; rep < std::max(reps, 1); ++rep) {
    for (int64_t w0 = 0; w0 + window_pages <= pages; w0 += window_pages) {
      const int pattern = static_cast<int>((w0 / window_pages) % kPatterns);
      const int streams = kStreams[pattern];
      const uint8_t* window = base + w0 * kPage;
      const auto start = Clock::now();
      pool->ParallelFor(window_pages, 1, [window, streams, &sink](int64_t p0, int64_t p1) {
        sink.fetch_add(SumBytes(window + p0 * kPage, static_cast<size_t>(p1 - p0) * kPage, streams),
                       std::memory_order_relaxed);
      });
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      windows[pattern].push_back(static_cast<double>(window_pages * kPage) / seconds / 1e9);
    }
  }
  BATON_CHECK(sink.load() != 1);  // keep the sums alive
  ReadBandwidth result;
  for (std::vector<double>& w : windows) {
    if (w.empty()) continue;
    std::sort(w.begin(), w.end());
    result.peak_gbs = std::max(result.peak_gbs, w.back());
    // The median window (the upper one of an even count): what the pattern sustains.
    result.sustained_gbs = std::max(result.sustained_gbs, w[w.size() / 2]);
  }
  return result;
}

double MeasureGemmGflops(ThreadPool* pool, cpu::DType dtype, int64_t m, int64_t n, int64_t k,
                         int reps) {
  const size_t w_bytes = cpu::RowBytes(dtype, k) * static_cast<size_t>(n);
  auto w = AllocAligned(w_bytes);
  FillRandomWeights(dtype, k, w.get(), w_bytes, 1);
  std::vector<float> x(static_cast<size_t>(m * k));
  Rng rng{2};
  for (float& v : x) v = rng.Unit();
  std::vector<float> y(static_cast<size_t>(m * n));
  const cpu::MatrixRef ref{dtype, w.get(), n, k};
  cpu::MatMul(x.data(), m, k, ref, nullptr, y.data(), n, pool);  // warm-up
  double best = 0;
  for (int rep = 0; rep < std::max(reps, 1); ++rep) {
    const auto start = Clock::now();
    cpu::MatMul(x.data(), m, k, ref, nullptr, y.data(), n, pool);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    best = std::max(best, 2.0 * static_cast<double>(m) * n * k / seconds / 1e9);
  }
  return best;
}

}  // namespace baton::bench
