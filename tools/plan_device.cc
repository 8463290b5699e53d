#include "tools/plan_device.h"

#include <chrono>
#include <fstream>
#include <string_view>

#include "bench/cpu_probes.h"
#include "common/strings.h"
#include "common/thread_pool.h"
#include "kernels/cpu/matmul.h"

namespace baton::tools {
namespace {

// Memory as nvidia-smi reports memory.total (MiB), since the datasheets' "80 GB" and
// "141 GB" round differently; bandwidth and dense bf16 tensor-core FLOP/s (without
// sparsity) from NVIDIA's datasheets: H200 SXM (nvidia.com/en-us/data-center/h200),
// H100 SXM (nvidia.com/en-us/data-center/h100), A100 80GB SXM (A100 datasheet, 2021).
struct GpuRow {
  const char* name;
  double memory_mib;
  double bandwidth_tbs;
  double bf16_tflops;
};
constexpr GpuRow kGpus[] = {
    {"h200", 143771, 4.8, 989},
    {"h100", 81559, 3.35, 989},
    {"a100", 81920, 2.039, 312},
};

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

absl::StatusOr<DeviceSpec> GpuDevice(const std::string& name) {
  for (const GpuRow& row : kGpus) {
    if (name == row.name) {
      return DeviceSpec{name, row.memory_mib * 1024 * 1024, row.bandwidth_tbs * 1e12,
                        row.bf16_tflops * 1e12};
    }
  }
  return absl::InvalidArgumentError(
      StrCat("--device '", name, "' is not one of h200, h100, a100, cpu"));
}

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

DeviceSpec CpuDevice(const CpuMeasurement& cpu) {
  return DeviceSpec{"cpu", cpu.mem_available_bytes, cpu.read_gbs * 1e9, cpu.gemm_gflops * 1e9};
}

}  // namespace baton::tools
