#include "capacity/gpu_devices.h"

#include "absl/strings/str_join.h"
#include "common/strings.h"

namespace baton::capacity {
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

}  // namespace

absl::StatusOr<DeviceSpec> GpuDevice(std::string_view name) {
  for (const GpuRow& row : kGpus) {
    if (name == row.name) {
      return DeviceSpec{std::string(name), row.memory_mib * 1024 * 1024, row.bandwidth_tbs * 1e12,
                        row.bf16_tflops * 1e12};
    }
  }
  return absl::InvalidArgumentError(
      StrCat("--device '", name, "' is not one of ", absl::StrJoin(GpuDeviceNames(), ", ")));
}

std::vector<std::string> GpuDeviceNames() {
  std::vector<std::string> names;
  for (const GpuRow& row : kGpus) names.emplace_back(row.name);
  return names;
}

}  // namespace baton::capacity
