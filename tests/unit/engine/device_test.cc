// --device and --device-id as the engine checks them before loading a model. Where CUDA is
// built, a GPU is visible and the plugin is built, cuda is OK and its kernels open;
// elsewhere each failure must name the flag and say what to do instead.
#include "engine/device.h"

#include <dlfcn.h>

#include <cstdlib>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cuda_plugin_abi.h"

namespace baton::engine {
namespace {

using ::testing::HasSubstr;

TEST(DeviceTest, CpuRunsEverywhere) { EXPECT_TRUE(CheckDevice({.device = "cpu"}).ok()); }

TEST(DeviceTest, AnUnknownDeviceNamesTheFlagAndTheChoices) {
  const absl::Status s = CheckDevice({.device = "tpu"});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("--device 'tpu'"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("cpu or cuda"));
}

TEST(DeviceTest, ANegativeDeviceIdIsRefused) {
  const absl::Status s = CheckDevice({.device = "cuda", .device_id = -1});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("--device-id -1"));
}

TEST(DeviceTest, CudaIsAClearErrorNeverACrash) {
  const absl::Status s = CheckDevice({.device = "cuda"});
  if (s.ok()) {  // a GPU and the plugin: its kernels open
    ASSERT_TRUE(CudaBuilt());
    auto ops = OpenGpuOps({.device = "cuda"}, /*batch_invariant=*/true);
    ASSERT_TRUE(ops.ok()) << ops.status();
    EXPECT_THAT(std::string((*ops)->name()), HasSubstr("cuda:0"));
    return;
  }
  const std::string m(s.message());
  EXPECT_THAT(m, HasSubstr("--device cuda"));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << m;
  if (!CudaBuilt()) {
    EXPECT_THAT(m, HasSubstr("this build has no CUDA"));
    EXPECT_THAT(m, HasSubstr("--device cpu"));  // what to do instead
  } else if (m.find("plugin") == std::string::npos) {
    EXPECT_THAT(m, HasSubstr("no CUDA device is visible"));
    EXPECT_THAT(m, HasSubstr("--device cpu"));
    std::printf("no GPU here: %s\n", m.c_str());
  }
  // Opening the kernels answers the same.
  const auto ops = OpenGpuOps({.device = "cuda"}, false);
  EXPECT_EQ(ops.status(), s);
}

// The plugin loads with every symbol resolved (RTLD_NOW) and answers through its one entry
// point, GPU or not: a plugin that cannot load is found here, in CI, not on a GPU machine.
TEST(DeviceTest, ThePluginLoadsAndRefusesAnotherAbi) {
  if (!CudaBuilt()) GTEST_SKIP() << "a build without CUDA has no plugin";
  const std::string path = CudaPluginPath();
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << ::dlerror();
  auto open =
      reinterpret_cast<kernels::CudaPluginOpenFn>(::dlsym(handle, kernels::kCudaPluginOpenSymbol));
  ASSERT_NE(open, nullptr);
  char error[512] = {};
  kernels::GpuOps* ops = nullptr;
  EXPECT_EQ(open(kernels::kCudaPluginAbi + 1, 0, 0, &ops, error, sizeof(error)),
            static_cast<int>(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(std::string(error), HasSubstr("rebuild both"));
  EXPECT_EQ(ops, nullptr);
  const int code = open(kernels::kCudaPluginAbi, 0, 1, &ops, error, sizeof(error));
  if (code == 0) {  // a GPU is here
    ASSERT_NE(ops, nullptr);
    delete ops;
  } else {
    EXPECT_EQ(code, static_cast<int>(absl::StatusCode::kFailedPrecondition)) << error;
    EXPECT_THAT(std::string(error), HasSubstr("no CUDA device"));
  }
}

TEST(DeviceTest, ThePluginIsFoundBesideTheBinaryOrWhereTheEnvironmentSays) {
  EXPECT_THAT(CudaPluginPath(), HasSubstr("libbaton_cuda.so"));
  ::setenv("BATON_CUDA_LIBRARY", "/nowhere/libbaton_cuda.so", 1);
  EXPECT_EQ(CudaPluginPath(), "/nowhere/libbaton_cuda.so");
  ::unsetenv("BATON_CUDA_LIBRARY");
}

TEST(DeviceTest, ADeviceIdPastTheVisibleGpusNamesTheFlag) {
  const absl::Status s = CheckDevice({.device = "cuda", .device_id = 1023});
  ASSERT_FALSE(s.ok());
  const std::string m(s.message());
  if (s.code() == absl::StatusCode::kInvalidArgument) {
    EXPECT_THAT(m, HasSubstr("--device-id 1023"));
  } else {  // no CUDA build, or no GPU: the reason comes before the id is looked at
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << m;
    EXPECT_THAT(m, HasSubstr("--device cuda"));
  }
}

}  // namespace
}  // namespace baton::engine
