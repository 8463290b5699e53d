// StreamCopy writes exactly what memcpy writes, for every size around its thresholds and
// every alignment of either side, and nothing past the end.
#include "transport/stream_copy.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"

namespace baton::transport {
namespace {

TEST(StreamCopy, EqualsMemcpyAtEverySizeAndAlignment) {
  std::vector<uint8_t> src(5000), dst(5200), want(5200);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 131 + 7);
  // Aligned to 64 so that offsets choose the destination's alignment.
  alignas(64) static uint8_t aligned[5200];
  for (size_t dst_off : {0, 1, 16, 64, 128}) {
    for (size_t src_off : {0, 3, 64}) {
      for (size_t n : {0, 1, 63, 64, 255, 256, 257, 320, 1024, 1031, 4096, 4800}) {
        std::memset(aligned, 0xAB, sizeof(aligned));
        std::memset(want.data(), 0xAB, want.size());
        StreamCopy(aligned + dst_off, src.data() + src_off, n);
        StreamFence();
        std::memcpy(want.data() + dst_off, src.data() + src_off, n);
        ASSERT_EQ(0, std::memcmp(aligned, want.data(), sizeof(aligned)))
            << "dst+" << dst_off << " src+" << src_off << " n=" << n;
      }
    }
  }
}

}  // namespace
}  // namespace baton::transport
