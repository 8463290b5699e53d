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

#include "absl/status/statusor.h"
#include "baton/internal/v1/kv_transfer.pb.h"
#include "transport/transfer_ticket.h"

namespace baton::worker {

// The longest dtype name accepted on the wire; the known ones are 3 or 4 bytes.
inline constexpr size_t kMaxDtypeBytes = 16;
// The longest block hash accepted on the wire; ValidateTicket requires exactly 32.
inline constexpr size_t kMaxBlockHashBytes = 32;

// `out` is overwritten.
void ToProto(const transport::PageLayout& layout, baton::internal::v1::PageLayout* out);
void ToProto(const transport::TransferTicket& ticket, baton::internal::v1::TransferTicket* out);
void ToProto(const transport::TransferComplete& complete,
             baton::internal::v1::TransferComplete* out);
baton::internal::v1::PageLayout ToProto(const transport::PageLayout& layout);
baton::internal::v1::TransferTicket ToProto(const transport::TransferTicket& ticket);
baton::internal::v1::TransferComplete ToProto(const transport::TransferComplete& complete);

// The bounded inverses of ToProto.
absl::StatusOr<transport::PageLayout> FromProto(const baton::internal::v1::PageLayout& layout);
absl::StatusOr<transport::TransferTicket> FromProto(
    const baton::internal::v1::TransferTicket& ticket, const transport::TicketLimits& limits);
absl::StatusOr<transport::TransferComplete> FromProto(
    const baton::internal::v1::TransferComplete& complete, const transport::TicketLimits& limits);

}  // namespace baton::worker
