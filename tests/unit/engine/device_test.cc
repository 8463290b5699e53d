// --device and --device-id as the engine checks them before loading a model. Where CUDA is
// built and a GPU is visible the CUDA path answers Unimplemented (the forward is not
// written yet); elsewhere each failure must name the flag and say what to do instead.
#include "engine/device.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

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
  ASSERT_FALSE(s.ok());
  const std::string m(s.message());
  EXPECT_THAT(m, HasSubstr("--device cuda"));
  EXPECT_THAT(m, HasSubstr("--device cpu"));  // what to do instead
  if (!CudaBuilt()) {
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(m, HasSubstr("this build has no CUDA"));
  } else if (s.code() == absl::StatusCode::kFailedPrecondition) {
    EXPECT_THAT(m, HasSubstr("no CUDA device is visible"));
    std::printf("no GPU here: %s\n", m.c_str());
  } else {
    EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << m;
    EXPECT_THAT(m, HasSubstr("GPU 0"));
  }
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
