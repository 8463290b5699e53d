// PutTargets, the receiver's check of messaged puts (transport/put_message.h): only a
// region's own key and only its bytes can be written; anything else writes nothing.
#include "transport/put_message.h"

#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace baton::transport {
namespace {

PutMessageHeader Header(uint64_t key, uint64_t offset) { return PutMessageHeader{key, offset}; }

TEST(PutTargetsTest, WritesOnlyWithinTheRegionItsKeyNames) {
  PutTargets targets;
  std::vector<std::byte> a(64, std::byte{0}), b(32, std::byte{0});
  const uint64_t ka = targets.Add(a.data(), a.size());
  const uint64_t kb = targets.Add(b.data(), b.size());
  EXPECT_NE(ka, 0U);
  EXPECT_NE(ka, kb);
  const std::vector<std::byte> data(16, std::byte{7});

  PutMessageHeader h = Header(ka, 48);
  ASSERT_TRUE(targets.Write(&h, sizeof(h), data.data(), 16).ok());
  EXPECT_EQ(a[47], std::byte{0});
  EXPECT_EQ(a[48], std::byte{7});
  EXPECT_EQ(a[63], std::byte{7});
  EXPECT_EQ(b[0], std::byte{0}) << "the other region is untouched";

  h = Header(ka, 49);  // one byte past the end
  EXPECT_EQ(targets.Write(&h, sizeof(h), data.data(), 16).code(), absl::StatusCode::kOutOfRange);
  h = Header(ka, ~uint64_t{0});
  EXPECT_EQ(targets.Write(&h, sizeof(h), data.data(), 16).code(), absl::StatusCode::kOutOfRange);
  h = Header(ka ^ kb ^ 1, 0);  // a key nobody was given (xor of two is neither, nor 0)
  if (h.key != 0 && h.key != ka && h.key != kb) {
    EXPECT_EQ(targets.Write(&h, sizeof(h), data.data(), 16).code(), absl::StatusCode::kNotFound);
  }
  h = Header(0, 0);
  EXPECT_EQ(targets.Write(&h, sizeof(h), data.data(), 16).code(), absl::StatusCode::kNotFound);
  h = Header(kb, 0);
  EXPECT_EQ(targets.Write(&h, sizeof(h) - 1, data.data(), 16).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(b[0], std::byte{0}) << "a refused message writes nothing";
  ASSERT_TRUE(targets.Write(&h, sizeof(h), data.data(), 0).ok()) << "an empty put is fine";

  targets.Remove(kb);
  EXPECT_EQ(targets.Write(&h, sizeof(h), data.data(), 16).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(b[0], std::byte{0});
}

TEST(RegionKeyTest, RoundTripsAndRefusesOtherFormats) {
  const std::string packed = PackRegionKey({0x1122334455667788, 4096, "ucx-bytes"});
  auto key = ParseRegionKey(packed);
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(key->put_key, 0x1122334455667788U);
  EXPECT_EQ(key->base, 4096U);
  EXPECT_EQ(key->ucx, "ucx-bytes");
  // Too short (no UCX key), another tag (a key from before the tag), empty.
  EXPECT_EQ(ParseRegionKey(PackRegionKey({1, 2, ""})).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::string other = packed;
  other[3] = '0';
  EXPECT_EQ(ParseRegionKey(other).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseRegionKey("").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace baton::transport
