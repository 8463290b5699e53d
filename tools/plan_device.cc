#include "tools/plan_device.h"

#include <chrono>
#include <fstream>
#include <string_view>

#include "bench/cpu_probes.h"
#include "common/thread_pool.h"
#include "kernels/cpu/matmul.h"

namespace baton::tools {
namespace {

constexpr size_t kReadProbeBytes = size_t{1} << 29;  // 512 MiB: far past any last-level cache
constexpr int kReadPasses = 2;
constexpr int kLongReadPasses = 2;
constexpr int kGemmReps = 2;

std::string CpuModelName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with("model name")) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    const size_t start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? std::string() : line.substr(start);
  }
  return "unknown CPU";
}

absl::StatusOr<double> MemAvailableBytes() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  constexpr std::string_view kField = "MemAvailable:";
  while (std::getline(in, line)) {
    if (line.starts_with(kField)) return 1024.0 * std::stod(line.substr(kField.size()));  // kB
  }
  return absl::UnavailableError(
      "/proc/meminfo has no MemAvailable; give the memory with --memory-gb");
}

}  // namespace

absl::StatusOr<CpuMeasurement> MeasureCpu(int threads) {
  CpuMeasurement m;
  const auto start = std::chrono::steady_clock::now();
  auto available = MemAvailableBytes();
  if (!available.ok()) return available.status();
  m.mem_available_bytes = *available;
  ThreadPool pool(threads);
  m.threads = pool.num_threads();
  m.model_name = CpuModelName();
  m.isa = cpu::ActiveIsa();
  bench::ReadProbe probe(&pool, kReadProbeBytes);
  const bench::ReadBandwidth read = probe.Measure(kReadPasses);
  m.peak_read_gbs = read.peak_gbs;
  // A decode step is one long read (tens of milliseconds on a CPU), not a burst: what
  // counts is the bandwidth over reads that long, which on a shared host is well below
  // the best 64 MiB windows, so the figure is a long read in the best pattern.
  const double long_read = kLongReadPasses * static_cast<double>(kReadProbeBytes);
  m.read_gbs = long_read / probe.TimeRead(long_read, read.pattern) / 1e9;
  m.gemm_gflops = bench::MeasureGemmGflops(&pool, cpu::DType::kBF16, 512, 2048, 2048, kGemmReps);
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return m;
}

capacity::DeviceSpec CpuDevice(const CpuMeasurement& cpu) {
  return capacity::DeviceSpec{"cpu", cpu.mem_available_bytes, cpu.read_gbs * 1e9,
                              cpu.gemm_gflops * 1e9};
}

}  // namespace baton::tools
