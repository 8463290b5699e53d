// The wire form of KV cache events (proto/baton/internal/v1/kv_events.proto) and back.
//
//   baton::internal::v1::KvEventBatch wire;
//   baton::worker::ToProto(batch, &wire);               // worker side
//   absl::StatusOr<KvEventBatch> got = baton::worker::FromProto(wire);  // router
//
// FromProto reads what a peer sent, so it trusts nothing: every hash must be 32 bytes, the
// hash spec version must be the one this build speaks, block_size and the counts must be
// within the limits below, and each stored event must carry block_size token ids per
// block. A violation is InvalidArgument naming the field and the bound.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "baton/internal/v1/kv_events.pb.h"
#include "kvcache/kv_events.h"

namespace baton::kvcache {

// Bounds on one message from a peer. A worker never gets near them: a batch holds one
// engine step's changes, and a snapshot one pool's blocks.
inline constexpr int64_t kMaxKvBlockSize = 1024;
inline constexpr int64_t kMaxHashesPerMessage = int64_t{1} << 20;  // over all events
inline constexpr int64_t kMaxEventsPerBatch = int64_t{1} << 16;

// hash_spec_version is set to kBlockHashSpecVersion. `out` is overwritten.
void ToProto(const KvEventBatch& batch, baton::internal::v1::KvEventBatch* out);
void ToProto(const KvSnapshot& snapshot, baton::internal::v1::KvSnapshot* out);

// The checked inverse of ToProto; InvalidArgument on anything ToProto would not produce
// from a well-formed engine batch or snapshot.
absl::StatusOr<KvEventBatch> FromProto(const baton::internal::v1::KvEventBatch& batch);
absl::StatusOr<KvSnapshot> FromProto(const baton::internal::v1::KvSnapshot& snapshot);

}  // namespace baton::kvcache
