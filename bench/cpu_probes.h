// Hardware probes the CPU benchmarks compare against.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/thread_pool.h"
#include "kernels/cpu/matmul.h"

namespace baton::bench {

// Streaming-read bandwidth in GB/s (10^9 bytes): the pool threads sum a `bytes` buffer
// (far larger than the last-level cache, e.g. 1 GiB) with the widest vector loads the CPU
// has, each thread a contiguous share of one 64 MiB window at a time, read as one stream
// or as four or eight side by side (windows take turns), over `reps` passes.
struct ReadBandwidth {
  // The best single window: the machine at its least disturbed, for a millisecond or so.
  double peak_gbs = 0;
  // The median window of the best of the three patterns. Not a bound: on a shared
  // machine it is 10-15 % below the peak, and a decode repetition that lasts a second or
  // more often reads faster than it. It shows how much of the gap between a long run and
  // the peak is the machine's own noise.
  double sustained_gbs = 0;
};
ReadBandwidth MeasureReadBandwidth(ThreadPool* pool, size_t bytes, int reps);

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
