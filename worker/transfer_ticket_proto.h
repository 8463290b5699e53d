// The wire form of the KV transfer contract (proto/baton/internal/v1/kv_transfer.proto)
// and back.
//
//   baton::internal::v1::TransferTicket wire = baton::worker::ToProto(ticket);  // receiver
//   absl::StatusOr<transport::TransferTicket> got =
//       baton::worker::FromProto(wire, limits);                                 // sender
//   if (got.ok()) status = transport::ValidateTicket(*got, local_layout, limits, now);
//
// FromProto reads what a peer sent, so it copies nothing it has not bounded first: every
// byte string within its limit (request_id, worker_address, rkey, dtype, each hash), and
// the page_ids and cached_block_hashes counts within limits.max_prompt_tokens. A violation
// is InvalidArgument naming the field and the bound. It does not check the contract itself
// (layout, pages, lease): that is transport::ValidateTicket / ValidateComplete, which the
// caller runs next.
#pragma once

#include <cstddef>
#include <vector>

#include "absl/status/statusor.h"
#include "baton/internal/v1/kv_transfer.pb.h"
#include "engine/sampler.h"
#include "transport/transfer_ticket.h"

namespace baton::worker {

// The longest dtype name accepted on the wire; the known ones are 3 or 4 bytes.
inline constexpr size_t kMaxDtypeBytes = 16;
// The longest block hash accepted on the wire; ValidateTicket requires exactly 32.
inline constexpr size_t kMaxBlockHashBytes = 32;

// `out` is overwritten.
void ToProto(const kvcache::PageLayout& layout, baton::internal::v1::PageLayout* out);
void ToProto(const transport::TransferTicket& ticket, baton::internal::v1::TransferTicket* out);
void ToProto(const transport::TransferComplete& complete,
             baton::internal::v1::TransferComplete* out);
baton::internal::v1::PageLayout ToProto(const kvcache::PageLayout& layout);
baton::internal::v1::TransferTicket ToProto(const transport::TransferTicket& ticket);
baton::internal::v1::TransferComplete ToProto(const transport::TransferComplete& complete);

void ToProto(const transport::RankPool& pool, baton::internal::v1::RankPool* out);
void ToProto(const transport::SliceSum& sum, baton::internal::v1::SliceChecksum* out);

// The bounded inverses of ToProto.
absl::StatusOr<transport::RankPool> FromProto(const baton::internal::v1::RankPool& pool,
                                              const transport::TicketLimits& limits);
transport::SliceSum FromProto(const baton::internal::v1::SliceChecksum& sum);
absl::StatusOr<kvcache::PageLayout> FromProto(const baton::internal::v1::PageLayout& layout);
absl::StatusOr<transport::TransferTicket> FromProto(
    const baton::internal::v1::TransferTicket& ticket, const transport::TicketLimits& limits);
absl::StatusOr<transport::TransferComplete> FromProto(
    const baton::internal::v1::TransferComplete& complete, const transport::TicketLimits& limits);

// The most top alternatives a completion's first_token_logprob may carry.
inline constexpr int kMaxFirstTokenTopLogprobs = 20;

// The first token of a completion as the receiver's engine takes it: the id, and when
// first_token_logprob is set, its logprob and alternatives. InvalidArgument naming the
// field when the logprob's id is not first_token, it has more than
// kMaxFirstTokenTopLogprobs alternatives, or an id lies outside [0, vocab_size).
absl::StatusOr<engine::SampledToken> FirstTokenFromProto(
    const baton::internal::v1::TransferComplete& complete, int32_t vocab_size);

// The receiver's checks of a ReserveRequest before it reserves anything: request_id 1 to
// limits.max_request_id_bytes bytes, at most limits.max_prompt_tokens prompt ids, a
// cache_salt of at most 1024 bytes, at most limits.max_ranks sender_ranks, and layouts the
// receiver's ranks `receivers` can take. A plain transfer (one rank on each side, one
// layout: transport::CheckSenderLayout) returns no layouts; a sliced one (either side a
// group, or the layouts differ: transport::CheckSenderSlices) returns the sender ranks'.
// The prompt's ids are the engine's to check.
absl::StatusOr<std::vector<kvcache::PageLayout>> CheckReserveRequest(
    const baton::internal::v1::ReserveRequest& request,
    const std::vector<kvcache::PageLayout>& receivers, const transport::TicketLimits& limits);

}  // namespace baton::worker
