#include "kvcache/kv_event_proto.h"

#include <cstring>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "common/status.h"
#include "common/strings.h"
#include "kvcache/block_hash.h"

namespace baton::kvcache {
namespace {

namespace pb = ::baton::internal::v1;

constexpr size_t kHashBytes = sizeof(BlockHash::bytes);

std::string HashBytes(const BlockHash& h) {
  return std::string(reinterpret_cast<const char*>(h.bytes.data()), h.bytes.size());
}

// `name` is the field's path for the error message, e.g.
// "KvEventBatch.events[2].stored.block_hashes[0]"; it is only built on failure.
template <typename Name>
absl::Status ParseHash(const std::string& bytes, const Name& name, BlockHash* out) {
  if (bytes.size() != kHashBytes) {
    return absl::InvalidArgumentError(
        StrCat(name(), " is ", bytes.size(), " bytes; a block hash is exactly ", kHashBytes));
  }
  std::memcpy(out->bytes.data(), bytes.data(), kHashBytes);
  return absl::OkStatus();
}

absl::Status CheckHeader(std::string_view message, uint32_t hash_spec_version,
                         uint32_t block_size) {
  if (hash_spec_version != static_cast<uint32_t>(kBlockHashSpecVersion)) {
    return absl::InvalidArgumentError(StrCat(message, ".hash_spec_version is ", hash_spec_version,
                                             "; this build speaks ", kBlockHashSpecVersion));
  }
  if (block_size < 1 || block_size > kMaxKvBlockSize) {
    return absl::InvalidArgumentError(StrCat(message, ".block_size is ", block_size,
                                             "; it must be in [1, ", kMaxKvBlockSize, "]"));
  }
  return absl::OkStatus();
}

absl::Status CheckHashCount(std::string_view message, int64_t count) {
  if (count > kMaxHashesPerMessage) {
    return absl::InvalidArgumentError(StrCat(message, " holds more than ", kMaxHashesPerMessage,
                                             " block_hashes (the limit per message)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<KvEvent> FromProtoEvent(const pb::KvEvent& in, int index, int64_t block_size) {
  const auto field = [index](std::string_view rest) {
    return StrCat("KvEventBatch.events[", index, "].", rest);
  };
  KvEvent out;
  switch (in.event_case()) {
    case pb::KvEvent::kStored: {
      const pb::BlockStored& stored = in.stored();
      out.type = KvEvent::Type::kBlockStored;
      if (stored.block_hashes_size() == 0) {
        return absl::InvalidArgumentError(
            StrCat(field("stored.block_hashes"), " is empty; a stored event has at least one"));
      }
      BATON_RETURN_IF_ERROR(ParseHash(
          stored.parent_hash(), [&] { return field("stored.parent_hash"); }, &out.parent_hash));
      const int64_t want_tokens = int64_t{stored.block_hashes_size()} * block_size;
      if (stored.token_ids_size() != want_tokens) {
        return absl::InvalidArgumentError(
            StrCat(field("stored.token_ids"), " has ", stored.token_ids_size(), " ids; ",
                   stored.block_hashes_size(), " block_hashes of block_size ", block_size, " need ",
                   want_tokens));
      }
      out.block_hashes.resize(stored.block_hashes_size());
      for (int i = 0; i < stored.block_hashes_size(); ++i) {
        BATON_RETURN_IF_ERROR(ParseHash(
            stored.block_hashes(i), [&] { return field(StrCat("stored.block_hashes[", i, "]")); },
            &out.block_hashes[i]));
      }
      // Token ids are opaque int32 values to the hash spec, so any value is accepted.
      out.token_ids.assign(stored.token_ids().begin(), stored.token_ids().end());
      return out;
    }
    case pb::KvEvent::kRemoved: {
      const pb::BlockRemoved& removed = in.removed();
      out.type = KvEvent::Type::kBlockRemoved;
      if (removed.block_hashes_size() == 0) {
        return absl::InvalidArgumentError(
            StrCat(field("removed.block_hashes"), " is empty; a removed event has at least one"));
      }
      out.block_hashes.resize(removed.block_hashes_size());
      for (int i = 0; i < removed.block_hashes_size(); ++i) {
        BATON_RETURN_IF_ERROR(ParseHash(
            removed.block_hashes(i), [&] { return field(StrCat("removed.block_hashes[", i, "]")); },
            &out.block_hashes[i]));
      }
      return out;
    }
    case pb::KvEvent::kAllCleared:
      out.type = KvEvent::Type::kAllCleared;
      return out;
    case pb::KvEvent::EVENT_NOT_SET:
      break;
  }
  // Also what an event type added by a newer peer looks like here: refuse it rather than
  // drop it, since the index would silently diverge.
  return absl::InvalidArgumentError(
      StrCat(field("event"), " is not set; expected one of stored, removed, all_cleared"));
}

}  // namespace

void ToProto(const KvEventBatch& batch, pb::KvEventBatch* out) {
  out->Clear();
  out->set_epoch(batch.epoch);
  out->set_sequence(batch.sequence);
  out->set_published_unix_micros(batch.published_unix_micros);
  out->set_block_size(static_cast<uint32_t>(batch.block_size));
  out->set_hash_spec_version(kBlockHashSpecVersion);
  out->mutable_events()->Reserve(static_cast<int>(batch.events.size()));
  for (const KvEvent& e : batch.events) {
    pb::KvEvent* pe = out->add_events();
    switch (e.type) {
      case KvEvent::Type::kBlockStored: {
        pb::BlockStored* stored = pe->mutable_stored();
        for (const BlockHash& h : e.block_hashes) stored->add_block_hashes(HashBytes(h));
        stored->set_parent_hash(HashBytes(e.parent_hash));
        stored->mutable_token_ids()->Add(e.token_ids.begin(), e.token_ids.end());
        break;
      }
      case KvEvent::Type::kBlockRemoved: {
        pb::BlockRemoved* removed = pe->mutable_removed();
        for (const BlockHash& h : e.block_hashes) removed->add_block_hashes(HashBytes(h));
        break;
      }
      case KvEvent::Type::kAllCleared:
        pe->mutable_all_cleared();
        break;
    }
  }
}

void ToProto(const KvSnapshot& snapshot, pb::KvSnapshot* out) {
  out->Clear();
  out->set_epoch(snapshot.epoch);
  out->set_sequence(snapshot.sequence);
  out->set_block_size(static_cast<uint32_t>(snapshot.block_size));
  out->set_hash_spec_version(kBlockHashSpecVersion);
  out->mutable_block_hashes()->Reserve(static_cast<int>(snapshot.block_hashes.size()));
  for (const BlockHash& h : snapshot.block_hashes) out->add_block_hashes(HashBytes(h));
}

absl::StatusOr<KvEventBatch> FromProto(const pb::KvEventBatch& in) {
  BATON_RETURN_IF_ERROR(CheckHeader("KvEventBatch", in.hash_spec_version(), in.block_size()));
  if (in.sequence() == 0) {
    return absl::InvalidArgumentError("KvEventBatch.sequence is 0; batches are numbered from 1");
  }
  if (in.events_size() > kMaxEventsPerBatch) {
    return absl::InvalidArgumentError(StrCat("KvEventBatch.events has ", in.events_size(),
                                             " entries; the limit is ", kMaxEventsPerBatch));
  }
  // Count first, so that an oversized batch is refused before anything is copied.
  int64_t hashes = 0;
  for (const pb::KvEvent& e : in.events()) {
    hashes += e.has_stored() ? e.stored().block_hashes_size() : 0;
    hashes += e.has_removed() ? e.removed().block_hashes_size() : 0;
  }
  BATON_RETURN_IF_ERROR(CheckHashCount("KvEventBatch", hashes));

  KvEventBatch out;
  out.epoch = in.epoch();
  out.sequence = in.sequence();
  out.published_unix_micros = in.published_unix_micros();
  out.block_size = in.block_size();
  out.events.reserve(in.events_size());
  for (int i = 0; i < in.events_size(); ++i) {
    BATON_ASSIGN_OR_RETURN(KvEvent event, FromProtoEvent(in.events(i), i, out.block_size));
    out.events.push_back(std::move(event));
  }
  return out;
}

absl::StatusOr<KvSnapshot> FromProto(const pb::KvSnapshot& in) {
  BATON_RETURN_IF_ERROR(CheckHeader("KvSnapshot", in.hash_spec_version(), in.block_size()));
  BATON_RETURN_IF_ERROR(CheckHashCount("KvSnapshot", in.block_hashes_size()));
  KvSnapshot out;
  out.epoch = in.epoch();
  out.sequence = in.sequence();
  out.block_size = in.block_size();
  out.block_hashes.resize(in.block_hashes_size());
  for (int i = 0; i < in.block_hashes_size(); ++i) {
    BATON_RETURN_IF_ERROR(ParseHash(
        in.block_hashes(i), [i] { return StrCat("KvSnapshot.block_hashes[", i, "]"); },
        &out.block_hashes[i]));
    if (i > 0 && !(out.block_hashes[i - 1] < out.block_hashes[i])) {
      return absl::InvalidArgumentError(StrCat("KvSnapshot.block_hashes[", i,
                                               "] is not greater than block_hashes[", i - 1,
                                               "]; they must be sorted ascending and unique"));
    }
  }
  return out;
}

}  // namespace baton::kvcache
