#include "kvcache/kv_event_proto.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "baton/internal/v1/kv_events.pb.h"
#include "common/strings.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kvcache/block_hash.h"
#include "kvcache/kv_events.h"

namespace baton::kvcache {
namespace {

namespace pb = ::baton::internal::v1;
using ::testing::HasSubstr;

BlockHash Hash(uint8_t seed) {
  BlockHash h;
  for (size_t i = 0; i < h.bytes.size(); ++i) h.bytes[i] = static_cast<uint8_t>(seed * 31 + i);
  return h;
}

std::vector<int32_t> Tokens(int n, int32_t first) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = first + i;
  return t;
}

KvEvent Stored(std::vector<BlockHash> hashes, BlockHash parent, std::vector<int32_t> tokens) {
  KvEvent e;
  e.type = KvEvent::Type::kBlockStored;
  e.block_hashes = std::move(hashes);
  e.parent_hash = parent;
  e.token_ids = std::move(tokens);
  return e;
}

KvEvent Removed(std::vector<BlockHash> hashes) {
  KvEvent e;
  e.type = KvEvent::Type::kBlockRemoved;
  e.block_hashes = std::move(hashes);
  return e;
}

KvEvent Cleared() {
  KvEvent e;
  e.type = KvEvent::Type::kAllCleared;
  return e;
}

void ExpectSameEvent(const KvEvent& a, const KvEvent& b) {
  EXPECT_EQ(a.type, b.type);
  EXPECT_EQ(a.block_hashes, b.block_hashes);
  EXPECT_EQ(a.parent_hash, b.parent_hash);
  EXPECT_EQ(a.token_ids, b.token_ids);
}

// engine -> proto -> bytes -> proto -> engine.
absl::StatusOr<KvEventBatch> ThroughTheWire(const KvEventBatch& batch) {
  pb::KvEventBatch wire;
  ToProto(batch, &wire);
  EXPECT_EQ(wire.hash_spec_version(), static_cast<uint32_t>(kBlockHashSpecVersion));
  const std::string bytes = wire.SerializeAsString();
  pb::KvEventBatch parsed;
  EXPECT_TRUE(parsed.ParseFromString(bytes));
  return FromProto(parsed);
}

KvEventBatch SampleBatch() {
  KvEventBatch batch;
  batch.epoch = 0xfedcba9876543211ull;
  batch.sequence = 42;
  batch.block_size = 4;
  batch.events.push_back(Stored({Hash(1), Hash(2)}, Hash(0), Tokens(8, 100)));
  batch.events.push_back(Removed({Hash(3), Hash(4), Hash(5)}));
  batch.events.push_back(Cleared());
  batch.events.push_back(Stored({Hash(6)}, Hash(1), {-1, 0, 7, 2147483647}));
  return batch;
}

TEST(KvEventProtoTest, BatchWithEveryEventTypeRoundTrips) {
  const KvEventBatch batch = SampleBatch();
  absl::StatusOr<KvEventBatch> got = ThroughTheWire(batch);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->epoch, batch.epoch);
  EXPECT_EQ(got->sequence, batch.sequence);
  EXPECT_EQ(got->block_size, batch.block_size);
  ASSERT_EQ(got->events.size(), batch.events.size());
  for (size_t i = 0; i < batch.events.size(); ++i) {
    SCOPED_TRACE(i);
    ExpectSameEvent(got->events[i], batch.events[i]);
  }
}

TEST(KvEventProtoTest, EachEventTypeAloneRoundTrips) {
  for (const KvEvent& e : SampleBatch().events) {
    KvEventBatch batch;
    batch.epoch = 7;
    batch.sequence = 1;
    batch.block_size = 4;
    batch.events = {e};
    absl::StatusOr<KvEventBatch> got = ThroughTheWire(batch);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->events.size(), 1u);
    ExpectSameEvent(got->events[0], e);
  }
}

TEST(KvEventProtoTest, WireFormUsesTheOneofAndRawHashBytes) {
  pb::KvEventBatch wire;
  ToProto(SampleBatch(), &wire);
  ASSERT_EQ(wire.events_size(), 4);
  EXPECT_TRUE(wire.events(0).has_stored());
  EXPECT_TRUE(wire.events(1).has_removed());
  EXPECT_TRUE(wire.events(2).has_all_cleared());
  EXPECT_EQ(wire.events(0).stored().block_hashes(0),
            std::string(reinterpret_cast<const char*>(Hash(1).bytes.data()), 32));
  EXPECT_EQ(wire.events(0).stored().token_ids_size(), 8);
}

TEST(KvEventProtoTest, SnapshotRoundTrips) {
  KvSnapshot snapshot;
  snapshot.epoch = 0x8000000000000001ull;
  snapshot.sequence = 9;
  snapshot.block_size = 16;
  snapshot.block_hashes = {Hash(1), Hash(2), Hash(3)};
  std::sort(snapshot.block_hashes.begin(), snapshot.block_hashes.end());

  pb::KvSnapshot wire;
  ToProto(snapshot, &wire);
  EXPECT_EQ(wire.hash_spec_version(), static_cast<uint32_t>(kBlockHashSpecVersion));
  pb::KvSnapshot parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire.SerializeAsString()));
  absl::StatusOr<KvSnapshot> got = FromProto(parsed);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->epoch, snapshot.epoch);
  EXPECT_EQ(got->sequence, snapshot.sequence);
  EXPECT_EQ(got->block_size, snapshot.block_size);
  EXPECT_EQ(got->block_hashes, snapshot.block_hashes);
}

TEST(KvEventProtoTest, EmptySnapshotRoundTrips) {
  KvSnapshot snapshot;
  snapshot.epoch = 3;
  snapshot.block_size = 16;
  pb::KvSnapshot wire;
  ToProto(snapshot, &wire);
  absl::StatusOr<KvSnapshot> got = FromProto(wire);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->sequence, 0u);
  EXPECT_TRUE(got->block_hashes.empty());
}

// A valid wire batch to break one field of at a time.
pb::KvEventBatch ValidWire() {
  pb::KvEventBatch wire;
  ToProto(SampleBatch(), &wire);
  EXPECT_TRUE(FromProto(wire).ok());
  return wire;
}

void ExpectInvalid(const absl::Status& status, const std::string& field) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(field));
}

TEST(KvEventProtoTest, RejectsWrongHashLength) {
  pb::KvEventBatch wire = ValidWire();
  wire.mutable_events(1)->mutable_removed()->set_block_hashes(2, std::string(31, 'x'));
  absl::Status s = FromProto(wire).status();
  ExpectInvalid(s, "events[1].removed.block_hashes[2]");
  EXPECT_THAT(std::string(s.message()), HasSubstr("31 bytes"));

  wire = ValidWire();
  wire.mutable_events(0)->mutable_stored()->set_block_hashes(0, std::string(33, 'x'));
  ExpectInvalid(FromProto(wire).status(), "events[0].stored.block_hashes[0]");

  wire = ValidWire();
  wire.mutable_events(0)->mutable_stored()->clear_parent_hash();
  ExpectInvalid(FromProto(wire).status(), "events[0].stored.parent_hash");

  pb::KvSnapshot snapshot;
  snapshot.set_hash_spec_version(kBlockHashSpecVersion);
  snapshot.set_block_size(16);
  snapshot.add_block_hashes(std::string(32, 'a'));
  snapshot.add_block_hashes("");
  ExpectInvalid(FromProto(snapshot).status(), "KvSnapshot.block_hashes[1]");
}

TEST(KvEventProtoTest, RejectsAnotherHashSpecVersion) {
  pb::KvEventBatch wire = ValidWire();
  wire.set_hash_spec_version(kBlockHashSpecVersion + 1);
  absl::Status s = FromProto(wire).status();
  ExpectInvalid(s, "hash_spec_version");
  EXPECT_THAT(std::string(s.message()),
              HasSubstr(StrCat("hash_spec_version is ", kBlockHashSpecVersion + 1,
                               "; this build speaks ", kBlockHashSpecVersion)));

  pb::KvSnapshot snapshot;
  snapshot.set_block_size(16);  // hash_spec_version left at 0
  ExpectInvalid(FromProto(snapshot).status(), "KvSnapshot.hash_spec_version is 0");
}

TEST(KvEventProtoTest, RejectsTokenCountMismatch) {
  pb::KvEventBatch wire = ValidWire();
  wire.mutable_events(0)->mutable_stored()->mutable_token_ids()->RemoveLast();
  absl::Status s = FromProto(wire).status();
  ExpectInvalid(s, "events[0].stored.token_ids");
  EXPECT_THAT(std::string(s.message()), HasSubstr("has 7 ids"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("need 8"));

  wire = ValidWire();
  wire.mutable_events(3)->mutable_stored()->add_token_ids(1);
  ExpectInvalid(FromProto(wire).status(), "events[3].stored.token_ids");
}

TEST(KvEventProtoTest, RejectsEventWithoutOneof) {
  pb::KvEventBatch wire = ValidWire();
  wire.add_events();
  ExpectInvalid(FromProto(wire).status(), "events[4].event is not set");
}

TEST(KvEventProtoTest, RejectsEventsWithoutHashes) {
  pb::KvEventBatch wire = ValidWire();
  wire.mutable_events(0)->mutable_stored()->clear_block_hashes();
  wire.mutable_events(0)->mutable_stored()->clear_token_ids();
  ExpectInvalid(FromProto(wire).status(), "events[0].stored.block_hashes is empty");

  wire = ValidWire();
  wire.mutable_events(1)->mutable_removed()->clear_block_hashes();
  ExpectInvalid(FromProto(wire).status(), "events[1].removed.block_hashes is empty");
}

TEST(KvEventProtoTest, RejectsBlockSizeOutOfRange) {
  pb::KvEventBatch wire = ValidWire();
  wire.set_block_size(0);
  absl::Status s = FromProto(wire).status();
  ExpectInvalid(s, "KvEventBatch.block_size is 0");
  EXPECT_THAT(std::string(s.message()), HasSubstr("[1, 1024]"));

  wire.set_block_size(kMaxKvBlockSize + 1);
  ExpectInvalid(FromProto(wire).status(), "block_size is 1025");

  pb::KvSnapshot snapshot;
  snapshot.set_hash_spec_version(kBlockHashSpecVersion);
  ExpectInvalid(FromProto(snapshot).status(), "KvSnapshot.block_size is 0");
}

TEST(KvEventProtoTest, RejectsSequenceZero) {
  pb::KvEventBatch wire = ValidWire();
  wire.set_sequence(0);
  ExpectInvalid(FromProto(wire).status(), "KvEventBatch.sequence is 0");
}

TEST(KvEventProtoTest, RejectsTooManyEvents) {
  pb::KvEventBatch wire = ValidWire();
  while (wire.events_size() <= kMaxEventsPerBatch) wire.add_events()->mutable_all_cleared();
  absl::Status s = FromProto(wire).status();
  ExpectInvalid(s, "KvEventBatch.events has 65537 entries");
  EXPECT_THAT(std::string(s.message()), HasSubstr("65536"));

  wire.mutable_events()->RemoveLast();  // exactly at the limit is fine
  EXPECT_TRUE(FromProto(wire).ok());
}

TEST(KvEventProtoTest, RejectsTooManyHashes) {
  const std::string hash(32, 'h');
  pb::KvEventBatch wire = ValidWire();  // 6 hashes already
  pb::BlockRemoved* removed = wire.add_events()->mutable_removed();
  for (int64_t i = 0; i < kMaxHashesPerMessage - 5; ++i) removed->add_block_hashes(hash);
  ExpectInvalid(FromProto(wire).status(), "KvEventBatch holds more than 1048576 block_hashes");
  removed->mutable_block_hashes()->RemoveLast();  // exactly at the limit is fine
  EXPECT_TRUE(FromProto(wire).ok());

  pb::KvSnapshot snapshot;
  snapshot.set_hash_spec_version(kBlockHashSpecVersion);
  snapshot.set_block_size(16);
  for (int64_t i = 0; i <= kMaxHashesPerMessage; ++i) snapshot.add_block_hashes(hash);
  ExpectInvalid(FromProto(snapshot).status(), "KvSnapshot holds more than 1048576");
}

TEST(KvEventProtoTest, RejectsUnsortedOrDuplicateSnapshotHashes) {
  pb::KvSnapshot snapshot;
  ToProto(
      KvSnapshot{.epoch = 1, .sequence = 2, .block_size = 16, .block_hashes = {Hash(1), Hash(1)}},
      &snapshot);
  ExpectInvalid(FromProto(snapshot).status(), "KvSnapshot.block_hashes[1] is not greater");

  BlockHash low, high;
  high.bytes[0] = 1;
  ToProto(KvSnapshot{.epoch = 1, .sequence = 2, .block_size = 16, .block_hashes = {high, low}},
          &snapshot);
  ExpectInvalid(FromProto(snapshot).status(), "block_hashes[1]");
}

}  // namespace
}  // namespace baton::kvcache
