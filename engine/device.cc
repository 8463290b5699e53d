#include "engine/device.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/cuda_plugin_abi.h"

#if BATON_HAVE_CUDA
#include "kernels/cuda/device.h"
#endif

namespace baton::engine {

bool CudaBuilt() { return BATON_HAVE_CUDA != 0; }

namespace {

const char* PluginOverride() {
  const char* env = std::getenv("BATON_CUDA_LIBRARY");
  return env != nullptr && *env != '\0' ? env : nullptr;
}

}  // namespace

std::string CudaPluginPath() {
  if (const char* env = PluginOverride(); env != nullptr) return env;
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return kernels::kCudaPluginName;
  return (self.parent_path() / kernels::kCudaPluginName).string();
}

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
  // A plugin named explicitly finds its own device when it is opened (the tests' host
  // emulation, tests/fakes/host_gpu_plugin.cc, has none to find).
  if (PluginOverride() != nullptr) return absl::OkStatus();
#if BATON_HAVE_CUDA
  auto device = kernels::cuda::OpenDevice(options.device_id);
  if (!device.ok()) return device.status();
  const std::string plugin = CudaPluginPath();
  if (::access(plugin.c_str(), R_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "--device cuda: GPU %d (%s) is visible, but the CUDA kernels' plugin %s is missing; "
        "build the target baton_cuda, set BATON_CUDA_LIBRARY to it, or run with --device cpu",
        device->id, device->name, plugin));
  }
  return absl::OkStatus();
#else
  return absl::FailedPreconditionError(
      "--device cuda: this build has no CUDA (nvcc was not found when it was configured); "
      "run with --device cpu, or configure again where /usr/local/cuda/bin/nvcc exists");
#endif
}

absl::StatusOr<std::unique_ptr<kernels::GpuOps>> OpenGpuOps(const DeviceOptions& options,
                                                            bool batch_invariant) {
  if (options.device != "cuda") {
    return absl::InvalidArgumentError(
        absl::StrCat("--device ", options.device, " has no GPU kernels to open"));
  }
  if (absl::Status s = CheckDevice(options); !s.ok()) return s;
  const std::string plugin = CudaPluginPath();
  // Never closed: the kernels' code must stay mapped while any object of the plugin lives.
  void* handle = ::dlopen(plugin.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--device cuda: cannot open the CUDA kernels' plugin ", plugin, ": ", ::dlerror(),
        "; check that the CUDA libraries (libcudart, libcublasLt) are on the loader's path"));
  }
  auto open =
      reinterpret_cast<kernels::CudaPluginOpenFn>(::dlsym(handle, kernels::kCudaPluginOpenSymbol));
  if (open == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--device cuda: ", plugin, " has no ", kernels::kCudaPluginOpenSymbol, "; rebuild it"));
  }
  char error[1024] = {};
  kernels::GpuOps* ops = nullptr;
  const int code = open(kernels::kCudaPluginAbi, options.device_id, batch_invariant ? 1 : 0, &ops,
                        error, sizeof(error));
  if (code != 0 || ops == nullptr) {
    return absl::Status(static_cast<absl::StatusCode>(code == 0 ? 13 : code),
                        absl::StrCat("--device cuda: ", error));
  }
  return std::unique_ptr<kernels::GpuOps>(ops);
}

}  // namespace baton::engine
