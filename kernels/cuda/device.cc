#include "kernels/cuda/device.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"

namespace baton::kernels::cuda {

absl::StatusOr<DeviceInfo> OpenDevice(int device_id) {
  DeviceInfo info;
  info.id = device_id;
  const cudaError_t counted = cudaGetDeviceCount(&info.visible);
  const char* visible_env = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::string env_note =
      visible_env == nullptr ? "" : absl::StrCat(" (CUDA_VISIBLE_DEVICES=", visible_env, ")");
  if (counted != cudaSuccess || info.visible == 0) {
    // A machine without a GPU or its driver lands here: cudaErrorNoDevice or
    // cudaErrorInsufficientDriver, both reported as the reason.
    return absl::FailedPreconditionError(absl::StrCat(
        "--device cuda: no CUDA device is visible", env_note, ": ",
        counted == cudaSuccess
            ? "the driver reports 0 devices"
            : absl::StrCat(cudaGetErrorName(counted), ": ", cudaGetErrorString(counted)),
        "; run with --device cpu, or on a machine with an NVIDIA GPU and its driver"));
  }
  if (device_id < 0 || device_id >= info.visible) {
    return absl::InvalidArgumentError(absl::StrCat("--device-id ", device_id, ": ", info.visible,
                                                   " CUDA device",
                                                   info.visible == 1 ? " is" : "s are", " visible",
                                                   env_note, "; give 0 to ", info.visible - 1));
  }
  cudaDeviceProp prop = {};
  BATON_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, device_id));
  BATON_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_id));
  info.name = prop.name;
  info.memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  info.major = prop.major;
  info.minor = prop.minor;
  return info;
}

}  // namespace baton::kernels::cuda
