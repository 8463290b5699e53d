// Hardware probes the CPU benchmarks compare against.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/thread_pool.h"
#include "kernels/cpu/matmul.h"

namespace baton::bench {

// Anonymous memory at a 2 MiB boundary, advised MADV_HUGEPAGE: on 2 MiB pages where the
// kernel allows, like the weights the engine maps or copies (common/mapped_file.h). Reads
// from 4 KiB pages were 6-27 % slower on this VM, so a probe on them understates the bound.
struct HugePageDeleter {
  void* map = nullptr;
  size_t map_bytes = 0;
  void operator()(uint8_t* p) const;
};
using HugePageBuffer = std::unique_ptr<uint8_t[], HugePageDeleter>;
HugePageBuffer AllocHugePages(size_t bytes);

// Streaming-read bandwidth in GB/s (10^9 bytes).
struct ReadBandwidth {
  // The best single window: the machine at its least disturbed, for a millisecond or so.
  double peak_gbs = 0;
  // The median window of the pattern with the best median, and that pattern (for
  // ReadProbe::TimeRead). On a shared machine it is 10-30 % below the peak.
  double sustained_gbs = 0;
  int pattern = 0;
};

// Streaming reads of a buffer far larger than the last-level cache (e.g. 1 GiB), on
// 2 MiB pages, by the pool threads, with the widest vector loads the CPU has: each
// thread sums a contiguous share of one 64 MiB window at a time, in one of four patterns:
// as one stream, as four or eight side by side, or in groups of eight 4 KiB rows read side
// by side with the next group prefetched, as the decode kernels read a matrix. Which one
// is fastest differs between machines. This is the bound a memory-bound decode step is
// measured against.
class ReadProbe {
 public:
  ReadProbe(ThreadPool* pool, size_t bytes);

  // `passes` over the buffer in windows that take turns at the four patterns.
  ReadBandwidth Measure(int passes);
  // Seconds to read `bytes` in `pattern` (ReadBandwidth::pattern), in 64 MiB windows, going on
  // from where the last read stopped (round the buffer), so every byte read was last
  // touched long ago. Timing a read of the bytes of one decode step right after the step
  // gives a bound measured over the same span and under the same neighbours as the step.
  double TimeRead(double bytes, int pattern);

 private:
  double ReadPages(int64_t first, int64_t count, int pattern);

  ThreadPool* pool_;
  int64_t pages_;  // of 4 KiB
  HugePageBuffer buffer_;
  int64_t next_page_ = 0;
};

// ReadProbe(pool, bytes).Measure(passes).
ReadBandwidth MeasureReadBandwidth(ThreadPool* pool, size_t bytes, int passes);

// Throughput of cpu::MatMul itself in GFLOP/s (2*m*n*k per call) on random data of the
// given weight type, best of `reps` calls after one warm-up; the "GEMM probe" prefill is
// measured against (typically m = 512, n = k = 2048).
double MeasureGemmGflops(ThreadPool* pool, cpu::DType dtype, int64_t m, int64_t n, int64_t k,
                         int reps);

// Fills `bytes` (a whole number of rows of `cols` elements of `dtype`) with finite
// random weights of magnitude below about 1: no NaN, infinity or subnormal, which could
// change a kernel's speed.
void FillRandomWeights(cpu::DType dtype, int64_t cols, void* data, size_t bytes, uint64_t seed);

}  // namespace baton::bench
