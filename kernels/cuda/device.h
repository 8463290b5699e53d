// Opening one CUDA device: how many are visible, what the chosen one is, and making it
// current on the calling thread. Host code only (built where CUDA is found).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace baton::kernels::cuda {

struct DeviceInfo {
  int id = 0;
  int visible = 0;  // devices this process sees (CUDA_VISIBLE_DEVICES applies)
  std::string name;
  int64_t memory_bytes = 0;
  int major = 0, minor = 0;  // compute capability
};

// FailedPrecondition when no device (or no driver) is visible, InvalidArgument when
// `device_id` is not below the visible count; each message names --device-id.
absl::StatusOr<DeviceInfo> OpenDevice(int device_id);

}  // namespace baton::kernels::cuda
