#include "engine/device.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#if BATON_HAVE_CUDA
#include "kernels/cuda/device.h"
#endif

namespace baton::engine {

bool CudaBuilt() { return BATON_HAVE_CUDA != 0; }

absl::Status CheckDevice(const DeviceOptions& options) {
  if (options.device == "cpu") return absl::OkStatus();
  if (options.device != "cuda") {
    return absl::InvalidArgumentError(
        absl::StrCat("--device '", options.device, "': want cpu or cuda"));
  }
  if (options.device_id < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--device-id ", options.device_id, ": want 0 or more"));
  }
#if BATON_HAVE_CUDA
  auto device = kernels::cuda::OpenDevice(options.device_id);
  if (!device.ok()) return device.status();
  return absl::UnimplementedError(absl::StrFormat(
      "--device cuda: GPU %d (%s, compute capability %d.%d, %.1f GiB) is visible, but the CUDA "
      "forward is not built yet; run with --device cpu",
      device->id, device->name, device->major, device->minor,
      static_cast<double>(device->memory_bytes) / (1 << 30)));
#else
  return absl::FailedPreconditionError(
      "--device cuda: this build has no CUDA (nvcc was not found when it was configured); "
      "run with --device cpu, or configure again where /usr/local/cuda/bin/nvcc exists");
#endif
}

}  // namespace baton::engine
