// The data-centre GPUs capacity planning knows, with their datasheet figures. `baton plan`
// adds this machine's CPU, measured (tools/plan_device.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "capacity/capacity_plan.h"

namespace baton::capacity {

// "h200", "h100", "a100" (SXM parts; sources in gpu_devices.cc and docs/operations.md).
absl::StatusOr<DeviceSpec> GpuDevice(std::string_view name);

// Their names, in the order above.
std::vector<std::string> GpuDeviceNames();

}  // namespace baton::capacity
