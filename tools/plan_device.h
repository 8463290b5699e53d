// `baton plan --device cpu`: this machine's CPU, measured on the spot (the GPUs'
// datasheet figures are capacity/gpu_devices.h).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "capacity/capacity_plan.h"

namespace baton::tools {

// This machine, measured: read bandwidth from bench/cpu_probes.h's streaming reads (all
// `threads`, a 512 MiB buffer on 2 MiB pages: one long read of 1 GiB in the pattern its
// windows found best), compute from its bf16 GEMM probe (cpu::MatMul, 512 x 2048 x 2048),
// memory from MemAvailable.
struct CpuMeasurement {
  std::string model_name;  // /proc/cpuinfo "model name"
  std::string isa;         // the kernels' instruction set (cpu::ActiveIsa)
  int threads = 0;
  double read_gbs = 0;
  double peak_read_gbs = 0;  // the best single window, for reference
  double gemm_gflops = 0;
  double mem_available_bytes = 0;
  double seconds = 0;  // the probes' own time
};

// threads <= 0: one per core, as engine_bench and the engine.
absl::StatusOr<CpuMeasurement> MeasureCpu(int threads);

// A DeviceSpec from a measurement.
capacity::DeviceSpec CpuDevice(const CpuMeasurement& cpu);

}  // namespace baton::tools
