// The host copy of GPU pages (engine/gpu_kv_mirror.h) on the host emulation of a device:
// the pages asked for, and only those, cross in each direction; a page outside the pool is
// an error, not a copy out of bounds.
#include "engine/gpu_kv_mirror.h"

#include <cstddef>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "tests/fakes/host_gpu_ops.h"

namespace baton::engine {
namespace {

constexpr int64_t kPageBytes = 96;
constexpr int64_t kPages = 10;

struct Pool {
  fakes::HostGpuOps ops;
  void* device = nullptr;
  std::vector<std::byte> host = std::vector<std::byte>(kPages * kPageBytes, std::byte{0});
  std::vector<std::byte> pattern = std::vector<std::byte>(kPages * kPageBytes);
  Pool() {
    device = *ops.Malloc(kPages * kPageBytes);
    for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<std::byte>(i * 7 + 3);
    EXPECT_TRUE(ops.CopyToDevice(device, pattern.data(), kPages * kPageBytes).ok());
    EXPECT_TRUE(ops.Synchronize().ok());
  }
  ~Pool() { ops.Free(device); }
  GpuKvMirror Mirror() {
    return GpuKvMirror(&ops, static_cast<std::byte*>(device), host.data(), kPageBytes, kPages);
  }
  std::vector<std::byte> Device() {
    std::vector<std::byte> out(kPages * kPageBytes);
    EXPECT_TRUE(ops.CopyToHost(out.data(), device, kPages * kPageBytes).ok());
    return out;
  }
};

bool PageIs(const std::vector<std::byte>& a, const std::vector<std::byte>& b, int64_t page) {
  for (int64_t i = page * kPageBytes; i < (page + 1) * kPageBytes; ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

TEST(GpuKvMirrorTest, ToHostCopiesThePagesAskedForAndNoOther) {
  Pool p;
  GpuKvMirror m = p.Mirror();
  // Out of order, repeated, in runs and alone.
  const std::vector<int32_t> pages = {7, 2, 3, 2, 9, 4};
  ASSERT_TRUE(m.ToHost(pages).ok());
  const std::vector<std::byte> zero(kPages * kPageBytes, std::byte{0});
  for (int64_t page = 0; page < kPages; ++page) {
    const bool asked = page == 2 || page == 3 || page == 4 || page == 7 || page == 9;
    EXPECT_TRUE(PageIs(p.host, asked ? p.pattern : zero, page)) << "page " << page;
  }
}

TEST(GpuKvMirrorTest, ToDeviceCopiesThePagesAskedForAndNoOther) {
  Pool p;
  GpuKvMirror m = p.Mirror();
  std::vector<std::byte> fresh(kPages * kPageBytes);
  for (size_t i = 0; i < fresh.size(); ++i) fresh[i] = static_cast<std::byte>(i * 11 + 5);
  p.host = fresh;
  ASSERT_TRUE(m.ToDevice(std::vector<int32_t>{0, 1, 5}).ok());
  const std::vector<std::byte> device = p.Device();
  for (int64_t page = 0; page < kPages; ++page) {
    const bool asked = page == 0 || page == 1 || page == 5;
    EXPECT_TRUE(PageIs(device, asked ? fresh : p.pattern, page)) << "page " << page;
  }
}

TEST(GpuKvMirrorTest, APageOutsideThePoolIsAnError) {
  Pool p;
  GpuKvMirror m = p.Mirror();
  for (const int32_t bad : {-1, static_cast<int32_t>(kPages)}) {
    const absl::Status to_host = m.ToHost(std::vector<int32_t>{1, bad});
    EXPECT_EQ(to_host.code(), absl::StatusCode::kOutOfRange) << to_host;
    EXPECT_NE(std::string(to_host.message()).find("outside the pool of 10 pages"),
              std::string::npos)
        << to_host;
    EXPECT_EQ(m.ToDevice(std::vector<int32_t>{bad}).code(), absl::StatusCode::kOutOfRange);
  }
  EXPECT_TRUE(PageIs(p.Device(), p.pattern, 1)) << "nothing was copied";
  EXPECT_TRUE(m.ToHost({}).ok());
}

}  // namespace
}  // namespace baton::engine
