#include "bench/cpu_probes.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include <sys/mman.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "common/check.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/quant_blocks.h"

namespace baton::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kReadWindowBytes = size_t{64} << 20;

}  // namespace

void HugePageDeleter::operator()(uint8_t* p) const {
  if (p != nullptr) ::munmap(map, map_bytes);
}

HugePageBuffer AllocHugePages(size_t bytes) {
  constexpr size_t kHuge = size_t{2} << 20;
  const size_t rounded = std::max<size_t>((bytes + kHuge - 1) / kHuge * kHuge, kHuge);
  // One huge page more than needed, so that the buffer can start at a 2 MiB boundary.
  void* map =
      ::mmap(nullptr, rounded + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  BATON_CHECK(map != MAP_FAILED);
  uint8_t* p =
      static_cast<uint8_t*>(map) + (kHuge - reinterpret_cast<uintptr_t>(map) % kHuge) % kHuge;
#ifdef MADV_HUGEPAGE
  (void)::madvise(p, rounded, MADV_HUGEPAGE);  // advice only: else 4 KiB pages
#endif
  return HugePageBuffer(p, HugePageDeleter{map, rounded + kHuge});
}

namespace {

constexpr size_t kRowBytes = 4096;
constexpr size_t kGroupRows = 8;

// Sums of 64-bit lanes over `streams` equal parts of [p, p + bytes) read side by side
// (and the rest, if any, alone); the result only keeps the loads from being optimised
// away. One sequential stream per thread does not reach the memory bandwidth on every
// machine; several, like the rows a decode kernel reads at once, can (too many thrash). `p` is
// 64-byte aligned and `bytes` a multiple of 256.
#if defined(__x86_64__)
__attribute__((target("avx512f"))) uint64_t SumAvx512(const uint8_t* p, size_t bytes, int streams,
                                                      size_t prefetch) {
  const size_t part = bytes / streams / 128 * 128;
  __m512i a0 = _mm512_setzero_si512(), a1 = a0;
  for (size_t off = 0; off < part; off += 128) {
    for (int s = 0; s < streams; ++s) {
      if (prefetch != 0) {
        _mm_prefetch(reinterpret_cast<const char*>(p + s * part + off + prefetch), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(p + s * part + off + prefetch + 64),
                     _MM_HINT_T0);
      }
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

__attribute__((target("avx2"))) uint64_t SumAvx2(const uint8_t* p, size_t bytes, int streams,
                                                 size_t prefetch) {
  const size_t part = bytes / streams / 128 * 128;
  __m256i a0 = _mm256_setzero_si256(), a1 = a0;
  for (size_t off = 0; off < part; off += 64) {
    for (int s = 0; s < streams; ++s) {
      const uint8_t* q = p + s * part + off;
      if (prefetch != 0) _mm_prefetch(reinterpret_cast<const char*>(q + prefetch), _MM_HINT_T0);
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

uint64_t SumPortable(const uint8_t* p, size_t bytes, int streams, size_t /*prefetch*/) {
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

// Sums `bytes` as `streams` > 0 equal parts side by side, each step also asking for the
// bytes `prefetch` further on (0: none).
uint64_t SumParts(const uint8_t* p, size_t bytes, int streams, size_t prefetch) {
#if defined(__x86_64__)
  const cpu::CpuFeatures& f = cpu::GetCpuFeatures();
  if (f.avx512f) return SumAvx512(p, bytes, streams, prefetch);
  if (f.avx2) return SumAvx2(p, bytes, streams, prefetch);
#endif
  return SumPortable(p, bytes, streams, prefetch);
}

// `streams` > 0: that many equal parts side by side. 0: the decode kernels' pattern
// (kernels/cpu/matmul_tiles_inl.h), groups of kGroupRows consecutive 4 KiB rows read side
// by side, each step also asking for the bytes the same step of the next group will read;
// the rest, past the last whole group, as one stream.
uint64_t SumBytes(const uint8_t* p, size_t bytes, int streams) {
  if (streams > 0) return SumParts(p, bytes, streams, 0);
  constexpr size_t kGroup = kRowBytes * kGroupRows;
  const size_t whole = bytes / kGroup * kGroup;
  uint64_t sum = 0;
  for (size_t g = 0; g < whole; g += kGroup) {
    sum += SumParts(p + g, kGroup, static_cast<int>(kGroupRows), kGroup);
  }
  return sum + SumParts(p + whole, bytes - whole, 1, 0);
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
    default: {
      // Random bits with finite, modest f16 scales (~2^-7), block by block.
      const cpu::BlockLayout layout = cpu::LayoutOf(dtype);
      BATON_CHECK(cols % layout.elems == 0);
      for (size_t off = 0; off + 8 <= bytes; off += 8) {
        const uint64_t q = rng.Next();
        std::memcpy(p + off, &q, 8);
      }
      for (size_t off = 0; off + layout.bytes <= bytes; off += layout.bytes) {
        for (int s : layout.scale_offsets) {
          if (s < 0) continue;
          const uint16_t d = static_cast<uint16_t>(0x2000 | (rng.Next() & 0x3ff));
          std::memcpy(p + off + s, &d, 2);
        }
      }
      return;
    }
  }
}

namespace {
constexpr size_t kPage = 4096;
// Streams per thread side by side; 0: row groups (SumBytes).
constexpr int kStreams[] = {1, 4, 8, 0};
constexpr int kPatterns = 4;
}  // namespace

ReadProbe::ReadProbe(ThreadPool* pool, size_t bytes)
    : pool_(pool),
      pages_(static_cast<int64_t>(std::max<size_t>(bytes / kPage, 1))),
      buffer_(AllocHugePages(static_cast<size_t>(pages_) * kPage)) {
  uint8_t* base = buffer_.get();
  // First touch by the threads that read, page by page, with nonzero data.
  pool_->ParallelFor(pages_, 1, [base](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p)
      std::memset(base + p * kPage, static_cast<int>(p & 0xff) | 1, kPage);
  });
}

double ReadProbe::ReadPages(int64_t first, int64_t count, int pattern) {
  const int streams = kStreams[pattern];
  const uint8_t* window = buffer_.get() + first * kPage;
  std::atomic<uint64_t> sink{0};
  const auto start = Clock::now();
  pool_->ParallelFor(count, 1, [window, streams, &sink](int64_t p0, int64_t p1) {
    sink.fetch_add(SumBytes(window + p0 * kPage, static_cast<size_t>(p1 - p0) * kPage, streams),
                   std::memory_order_relaxed);
  });
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  BATON_CHECK(sink.load() != 1);  // keep the sums alive
  return seconds;
}

ReadBandwidth ReadProbe::Measure(int passes) {
  // Timed in windows, each reading memory last touched a whole buffer ago. Windows take
  // turns at the patterns.
  const int64_t window_pages = std::min<int64_t>(pages_, int64_t{kReadWindowBytes / kPage});
  std::vector<double> windows[kPatterns];
  for (int pass = 0; pass < std::max(passes, 1); ++pass) {
    for (int64_t w0 = 0; w0 + window_pages <= pages_; w0 += window_pages) {
      const int pattern = static_cast<int>((w0 / window_pages) % kPatterns);
      const double seconds = ReadPages(w0, window_pages, pattern);
      windows[pattern].push_back(static_cast<double>(window_pages * kPage) / seconds / 1e9);
    }
  }
  next_page_ = 0;
  ReadBandwidth result;
  for (int pattern = 0; pattern < kPatterns; ++pattern) {
    std::vector<double>& w = windows[pattern];
    if (w.empty()) continue;
    std::sort(w.begin(), w.end());
    result.peak_gbs = std::max(result.peak_gbs, w.back());
    // The median window (the upper one of an even count): what the pattern sustains.
    if (w[w.size() / 2] > result.sustained_gbs) {
      result.sustained_gbs = w[w.size() / 2];
      result.pattern = pattern;
    }
  }
  return result;
}

double ReadProbe::TimeRead(double bytes, int pattern) {
  const int64_t window_pages = std::min<int64_t>(pages_, int64_t{kReadWindowBytes / kPage});
  auto left = std::max<int64_t>(1, static_cast<int64_t>(bytes / kPage));
  double seconds = 0;
  while (left > 0) {
    if (next_page_ >= pages_) next_page_ = 0;
    const int64_t count = std::min({left, window_pages, pages_ - next_page_});
    seconds += ReadPages(next_page_, count, pattern);
    next_page_ += count;
    left -= count;
  }
  return seconds;
}

ReadBandwidth MeasureReadBandwidth(ThreadPool* pool, size_t bytes, int passes) {
  return ReadProbe(pool, bytes).Measure(passes);
}

double MeasureGemmGflops(ThreadPool* pool, cpu::DType dtype, int64_t m, int64_t n, int64_t k,
                         int reps) {
  const size_t w_bytes = cpu::RowBytes(dtype, k) * static_cast<size_t>(n);
  auto w = AllocHugePages(w_bytes);
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
