// Throughput of the CPU matmul kernels against the machine's own bounds.
//
//   kernel_bench [--threads N] [--quick] [--dtype bf16]...
//   kernel_bench --attention
//
// Prints the streaming-read bandwidth (cpu_probes.h), the dispatch cost of an empty
// ParallelFor, and for each weight type the GEMM probe (MatMul at m=512, n=k=2048); then,
// for the linear layers of Llama-3.2-1B and SmolLM2-135M ([out x in]):
//  - m=1 (decode): W bytes / time in GB/s and as % of the read bandwidth, and the time
//    per call. Calls go round copies of W laid end to end over --cold-mib (or one W, if
//    larger), so W always comes from memory; the best of many windows of >= 32 MiB;
//  - m=512 (prefill): GFLOP/s and as % of the GEMM probe.
// With --attention, only the time per query of attention over paged K/V (AttendQueries
// alone and in GQA groups of 2 and 4), per head_dim, position and page type, on one thread
// with the pages in cache (a decode step of a small model, whose KV cache is a few MiB).
// Every figure is the best of several runs after a warm-up (on a shared machine the best
// is the least disturbed). BATON_CPU_ISA caps the ISA.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "bench/cpu_probes.h"
#include "common/thread_pool.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/matmul.h"

namespace {

using baton::ThreadPool;
using baton::cpu::DType;
using baton::cpu::MatrixRef;
using Clock = std::chrono::steady_clock;

struct Shape {
  const char* model;
  const char* name;
  int64_t n;  // out features (rows of W)
  int64_t k;  // in features
};

constexpr Shape kShapes[] = {
    {"llama3.2-1b", "q/o", 2048, 2048},       {"llama3.2-1b", "k/v", 512, 2048},
    {"llama3.2-1b", "gate/up", 8192, 2048},   {"llama3.2-1b", "down", 2048, 8192},
    {"llama3.2-1b", "lm_head", 128256, 2048}, {"smollm2-135m", "q/o", 576, 576},
    {"smollm2-135m", "k/v", 192, 576},        {"smollm2-135m", "gate/up", 1536, 576},
    {"smollm2-135m", "down", 576, 1536},      {"smollm2-135m", "lm_head", 49152, 576},
};

constexpr size_t kWindowBytes = size_t{32} << 20;

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

DType ParseDType(const std::string& s) {
  for (int i = 0; i <= static_cast<int>(DType::kQ6_K); ++i) {
    const auto d = static_cast<DType>(i);
    if (s == baton::cpu::DTypeName(d)) return d;
  }
  std::fprintf(stderr, "kernel_bench: unknown dtype %s\n", s.c_str());
  std::exit(2);
}

// Seconds per empty ParallelFor that reaches every thread.
double DispatchSeconds(ThreadPool& pool, int calls) {
  const auto start = Clock::now();
  for (int i = 0; i < calls; ++i) {
    pool.ParallelFor(pool.num_threads(), 1, [](int64_t, int64_t) {});
  }
  return Seconds(start) / calls;
}

// Nanoseconds per query of AttendQueries calls for `count` queries at `pos`, over
// 16-position pages of one KV head in a shuffled block table.
double AttentionNanoseconds(baton::cpu::KvDtype dtype, int64_t head_dim, int64_t pos,
                            int64_t count) {
  using baton::cpu::KvDtype;
  constexpr int64_t kBlockSize = 16;
  const int64_t blocks = pos / kBlockSize + 1;
  const int64_t rows = kBlockSize * head_dim;  // K (or V) of the head in one page
  std::vector<float> values(blocks * 2 * rows);
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = static_cast<float>((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
  }
  std::vector<baton::cpu::Bf16> bf16(values.size());
  for (size_t i = 0; i < values.size(); ++i) bf16[i] = baton::cpu::FloatToBf16(values[i]);
  std::vector<int32_t> table(blocks);
  for (int64_t b = 0; b < blocks; ++b) table[b] = static_cast<int32_t>((b * 7) % blocks);
  const char* base = dtype == KvDtype::kBf16 ? reinterpret_cast<const char*>(bf16.data())
                                             : reinterpret_cast<const char*>(values.data());
  const size_t element = dtype == KvDtype::kBf16 ? sizeof(baton::cpu::Bf16) : sizeof(float);
  const baton::cpu::PagedKvView kv{.k = base,
                                   .v = base + rows * element,
                                   .dtype = dtype,
                                   .block_stride = 2 * rows,
                                   .block_size = kBlockSize,
                                   .head_stride = 2 * rows,
                                   .head_dim = head_dim};
  std::vector<float> q(count * head_dim), out(count * head_dim), scores(count * (pos + 1));
  for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<float>(i % 7) * 0.05f - 0.15f;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  // About 20 ms a run whatever the size: calls * count * (pos + 1) * head_dim stays constant.
  const int64_t calls = std::max<int64_t>(100, (int64_t{1} << 26) / (count * (pos + 1) * head_dim));
  auto run = [&] {
    for (int64_t i = 0; i < calls; ++i) {
      baton::cpu::AttendQueries(q.data(), count, pos, 0, table.data(), kv, scale, scores.data(),
                                out.data());
    }
  };
  run();
  double best = 1e30;
  for (int r = 0; r < 15; ++r) {
    const auto start = Clock::now();
    run();
    best = std::min(best, Seconds(start));
  }
  return best / static_cast<double>(calls * count) * 1e9;
}

void RunAttention() {
  using baton::cpu::KvDtype;
  std::printf("kernel_bench: attention, isa %s, 1 thread, pages in cache\n",
              baton::cpu::ActiveIsa());
  std::printf("%-5s %8s %6s | %10s %8s | ns/query in groups of %6s %6s\n", "pages", "head_dim",
              "pos", "ns/query", "ns/key", "2", "4");
  for (const KvDtype dtype : {KvDtype::kF32, KvDtype::kBf16}) {
    for (const int64_t head_dim : {8, 32, 64, 128}) {
      for (const int64_t pos : {127, 1023}) {
        const double alone = AttentionNanoseconds(dtype, head_dim, pos, 1);
        const double pairs = AttentionNanoseconds(dtype, head_dim, pos, 2);
        const double fours = AttentionNanoseconds(dtype, head_dim, pos, 4);
        std::printf("%-5s %8lld %6lld | %10.1f %8.2f | %29.1f %6.1f\n",
                    dtype == KvDtype::kBf16 ? "bf16" : "f32", static_cast<long long>(head_dim),
                    static_cast<long long>(pos), alone, alone / static_cast<double>(pos + 1), pairs,
                    fours);
        std::fflush(stdout);
      }
    }
  }
}

int Main(int argc, char** argv) {
  CLI::App app{"Throughput of the CPU matmul kernels (see docs/perf/kernels.md)"};
  int threads = static_cast<int>(std::thread::hardware_concurrency());
  bool quick = false;
  std::vector<std::string> dtype_names = {"f32", "f16", "bf16", "q8_0"};
  int cold_mib = 512;
  bool skip_lm_head_prefill = false;
  bool decode_only = false;
  app.add_option("--threads", threads, "Threads in the pool (default: all cores)")
      ->check(CLI::Range(1, 4096));
  app.add_flag("--quick", quick,
               "Fewer passes, a 256 MiB cold set and no m=512 lm_head (a short smoke run)");
  app.add_option("--dtype", dtype_names, "Weight types to run")
      ->check(CLI::IsMember({"f32", "f16", "bf16", "q8_0"}));
  app.add_option("--cold-mib", cold_mib, "MiB of weights the m=1 calls go round")
      ->capture_default_str()
      ->check(CLI::Range(64, 1 << 16));
  app.add_flag("--skip-lm-head-prefill", skip_lm_head_prefill,
               "Leave out the m=512 lm_head (the slowest case)");
  app.add_flag("--decode-only", decode_only, "Only the m=1 column (and no GEMM probe)");
  bool attention = false;
  app.add_flag("--attention", attention,
               "Only the attention kernel, one query on one thread (no matmul figures)");
  CLI11_PARSE(app, argc, argv);
  if (attention) {
    RunAttention();
    return 0;
  }
  if (quick) {
    cold_mib = std::min(cold_mib, 256);
    skip_lm_head_prefill = true;
  }
  const int reps = quick ? 2 : 4;  // passes of the bandwidth probe
  const int windows = quick ? 20 : 60;
  const int prefill_reps = quick ? 3 : 5;

  ThreadPool pool(threads);
  std::printf("kernel_bench: isa %s, %d threads%s\n", baton::cpu::ActiveIsa(), pool.num_threads(),
              quick ? " (quick)" : "");
  const baton::bench::ReadBandwidth read =
      baton::bench::MeasureReadBandwidth(&pool, (quick ? size_t{512} : size_t{1024}) << 20, reps);
  // m=1 reports its best window, so it is set against the probe's best window.
  const double bandwidth = read.peak_gbs;
  std::printf("read bandwidth: %.1f GB/s (best window; median window %.1f GB/s)\n", bandwidth,
              read.sustained_gbs);
  DispatchSeconds(pool, 1000);
  std::printf("ParallelFor dispatch: %.2f us\n", DispatchSeconds(pool, 20000) * 1e6);

  // One arena holds the cold set for m=1 (and the matrix for m=512).
  size_t arena_bytes = static_cast<size_t>(cold_mib) << 20;
  for (const std::string& name : dtype_names) {
    for (const Shape& s : kShapes) {
      arena_bytes = std::max(arena_bytes, baton::cpu::RowBytes(ParseDType(name), s.k) * s.n);
    }
  }
  // On 2 MiB pages, like the engine's weights and the read probe.
  const baton::bench::HugePageBuffer arena = baton::bench::AllocHugePages(arena_bytes);
  std::vector<float> x(512 * 8192);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<float>((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
  }
  std::vector<float> y(512 * 128256);

  for (const std::string& name : dtype_names) {
    const DType dtype = ParseDType(name);
    const double probe =
        decode_only ? 0
                    : baton::bench::MeasureGemmGflops(&pool, dtype, 512, 2048, 2048, prefill_reps);
    if (decode_only) {
      std::printf("\n[%s]\n", name.c_str());
    } else {
      std::printf("\n[%s] GEMM probe (m=512, n=k=2048): %.1f GFLOP/s\n", name.c_str(), probe);
    }
    std::printf("%-13s %-8s %7s %6s | %9s %6s %7s | %10s %6s\n", "model", "layer", "n", "k",
                "m=1 GB/s", "% bw", "us", "m=512 GF/s", "% gemm");
    // Random weights everywhere: every shape of this dtype reads from the same arena.
    baton::bench::FillRandomWeights(dtype, 32, arena.get(), arena_bytes, 7);
    for (const Shape& s : kShapes) {
      const size_t w_bytes = baton::cpu::RowBytes(dtype, s.k) * s.n;
      // Decode: calls on consecutive copies of W in the arena, wrapping around, timed in
      // windows of at least kWindowBytes; the best window counts. A copy is read again
      // only after the whole arena (>> last-level cache) has been, so W comes from memory.
      const size_t copies = std::max<size_t>(1, arena_bytes / w_bytes);
      const size_t per_window =
          std::min(copies, std::max<size_t>(1, (kWindowBytes + w_bytes - 1) / w_bytes));
      size_t next = 0;
      auto window = [&] {
        for (size_t c = 0; c < per_window; ++c) {
          const MatrixRef w{dtype, arena.get() + next * w_bytes, s.n, s.k};
          baton::cpu::MatMul(x.data(), 1, s.k, w, nullptr, y.data(), s.n, &pool);
          next = next + 1 == copies ? 0 : next + 1;
        }
      };
      for (size_t c = 0; c < copies; c += per_window) window();  // warm-up: one lap
      double best = 1e30;
      for (int r = 0; r < windows; ++r) {
        const auto start = Clock::now();
        window();
        best = std::min(best, Seconds(start));
      }
      const double gbs = static_cast<double>(w_bytes) * per_window / best / 1e9;
      const double us_per_call = best / per_window * 1e6;
      std::printf("%-13s %-8s %7lld %6lld | %9.1f %5.0f%% %7.1f |", s.model, s.name,
                  static_cast<long long>(s.n), static_cast<long long>(s.k), gbs,
                  100 * gbs / bandwidth, us_per_call);
      // Prefill.
      if (decode_only || (skip_lm_head_prefill && std::string(s.name) == "lm_head")) {
        std::printf(" %10s %6s\n", "-", "-");
        std::fflush(stdout);
        continue;
      }
      const MatrixRef w{dtype, arena.get(), s.n, s.k};
      baton::cpu::MatMul(x.data(), 512, s.k, w, nullptr, y.data(), s.n, &pool);
      double best_prefill = 1e30;
      for (int r = 0; r < prefill_reps; ++r) {
        const auto start = Clock::now();
        baton::cpu::MatMul(x.data(), 512, s.k, w, nullptr, y.data(), s.n, &pool);
        best_prefill = std::min(best_prefill, Seconds(start));
      }
      const double gflops = 2.0 * 512 * s.n * s.k / best_prefill / 1e9;
      std::printf(" %10.1f %5.0f%%\n", gflops, 100 * gflops / probe);
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kernel_bench: %s\n", e.what());
    return 1;
  }
}
