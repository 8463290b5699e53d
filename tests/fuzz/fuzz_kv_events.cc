// Fuzzes the router's side of the KV event stream: bytes a worker sent, parsed as a
// baton.internal.v1.KvEventBatch and as a KvSnapshot, then checked by FromProto. Besides
// "no crash", whatever FromProto accepts must satisfy the promises the KV index relies on,
// and must survive ToProto -> FromProto unchanged.
//
// The seeds in corpus/kv_events are serialized messages written with protoc from text
// format, e.g.
//   protoc -Iproto --encode=baton.internal.v1.KvEventBatch \
//     proto/baton/internal/v1/kv_events.proto < batch.txtpb > corpus/kv_events/batch_valid.bin
// batch_valid (stored, removed, all_cleared), batch_bad_spec_version (hash_spec_version 2),
// batch_bad_tokens (a stored event one token short, and an event with no oneof set) and
// snapshot_valid (two sorted hashes).
#include <cstdint>
#include <cstdlib>

#include "baton/internal/v1/kv_events.pb.h"
#include "kvcache/kv_event_proto.h"

namespace {

namespace pb = ::baton::internal::v1;
using baton::kvcache::KvEvent;

void Require(bool cond) {
  if (!cond) std::abort();
}

bool SameEvent(const KvEvent& a, const KvEvent& b) {
  return a.type == b.type && a.block_hashes == b.block_hashes && a.parent_hash == b.parent_hash &&
         a.token_ids == b.token_ids;
}

void ExerciseBatch(const uint8_t* data, size_t size) {
  pb::KvEventBatch wire;
  if (!wire.ParseFromArray(data, static_cast<int>(size))) return;
  absl::StatusOr<baton::kvcache::KvEventBatch> batch = baton::kvcache::FromProto(wire);
  if (!batch.ok()) {
    Require(batch.status().code() == absl::StatusCode::kInvalidArgument);
    Require(!batch.status().message().empty());
    return;
  }
  Require(batch->block_size >= 1 && batch->block_size <= baton::kvcache::kMaxKvBlockSize);
  Require(batch->sequence >= 1);
  Require(static_cast<int64_t>(batch->events.size()) <= baton::kvcache::kMaxEventsPerBatch);
  int64_t hashes = 0;
  for (const KvEvent& e : batch->events) {
    hashes += static_cast<int64_t>(e.block_hashes.size());
    switch (e.type) {
      case KvEvent::Type::kBlockStored:
        Require(!e.block_hashes.empty());
        Require(static_cast<int64_t>(e.token_ids.size()) ==
                static_cast<int64_t>(e.block_hashes.size()) * batch->block_size);
        break;
      case KvEvent::Type::kBlockRemoved:
        Require(!e.block_hashes.empty() && e.token_ids.empty());
        break;
      case KvEvent::Type::kAllCleared:
        Require(e.block_hashes.empty() && e.token_ids.empty());
        break;
    }
  }
  Require(hashes <= baton::kvcache::kMaxHashesPerMessage);

  pb::KvEventBatch again;
  baton::kvcache::ToProto(*batch, &again);
  absl::StatusOr<baton::kvcache::KvEventBatch> round = baton::kvcache::FromProto(again);
  Require(round.ok());
  Require(round->epoch == batch->epoch && round->sequence == batch->sequence &&
          round->block_size == batch->block_size && round->events.size() == batch->events.size());
  for (size_t i = 0; i < batch->events.size(); ++i) {
    Require(SameEvent(round->events[i], batch->events[i]));
  }
}

void ExerciseSnapshot(const uint8_t* data, size_t size) {
  pb::KvSnapshot wire;
  if (!wire.ParseFromArray(data, static_cast<int>(size))) return;
  absl::StatusOr<baton::kvcache::KvSnapshot> snapshot = baton::kvcache::FromProto(wire);
  if (!snapshot.ok()) {
    Require(snapshot.status().code() == absl::StatusCode::kInvalidArgument);
    Require(!snapshot.status().message().empty());
    return;
  }
  Require(snapshot->block_size >= 1 && snapshot->block_size <= baton::kvcache::kMaxKvBlockSize);
  Require(static_cast<int64_t>(snapshot->block_hashes.size()) <=
          baton::kvcache::kMaxHashesPerMessage);
  for (size_t i = 1; i < snapshot->block_hashes.size(); ++i) {
    Require(snapshot->block_hashes[i - 1] < snapshot->block_hashes[i]);
  }
  pb::KvSnapshot again;
  baton::kvcache::ToProto(*snapshot, &again);
  absl::StatusOr<baton::kvcache::KvSnapshot> round = baton::kvcache::FromProto(again);
  Require(round.ok() && round->epoch == snapshot->epoch && round->sequence == snapshot->sequence &&
          round->block_size == snapshot->block_size &&
          round->block_hashes == snapshot->block_hashes);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (size_t{1} << 30)) return 0;  // ParseFromArray takes an int
  ExerciseBatch(data, size);
  ExerciseSnapshot(data, size);
  return 0;
}
