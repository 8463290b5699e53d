// Fuzzes both ends of the KV transfer contract with bytes a peer sent. The first byte
// picks the message: below 0x80 and even, the rest is a serialized
// baton.internal.v1.TransferTicket (the sender's side: FromProto, then ValidateTicket
// against a fixed local layout); below 0x80 and odd, a TransferComplete (the receiver's
// side: FromProto, FirstTokenFromProto, then ValidateComplete against a fixed valid
// ticket); 0x80 and above, a ReserveRequest (the receiver's CheckReserveRequest). Besides "no
// crash", whatever FromProto accepts must respect the limits and survive ToProto -> FromProto
// unchanged, and a ticket ValidateTicket accepts must describe pages inside the pool.
//
// The seeds in corpus/transfer_ticket (.bin) are the selector byte followed by a message that a
// throwaway program built with worker::ToProto from the structs below (LocalLayout,
// IssuedTicket's request id and page count; now = kNowMs):
//   ticket_valid        a 200-token prompt, 4 cached blocks with their hashes, 9 pages in a
//                       64-page pool, 96-byte worker address, 48-byte rkey, lease now + 60 s
//   ticket_bad_layout   the same with num_kv_heads 8 (page_bytes and pool follow)
//   ticket_bad_page     the same with page_ids[3] = 64, one past the pool
//   complete_valid      req-1, first_token 42, 2 blocks, 8192 bytes
//   complete_bad_count  the same with blocks_written 1
//   complete_logprob    complete_valid with first_token_logprob (2 alternatives), 16 cached
//   reserve_valid       selector 0x80: req-1, 4 prompt ids, LocalLayout, lease 5 s
//   reserve_other_layout  the same with num_kv_heads 8 (page_bytes follows)
//   ticket_sliced       ticket_valid plus two ranks: TwoSlices' layouts, 64-page pools
//   reserve_sliced      reserve_valid plus sender_ranks: TwoSlices' layouts
// (pp_size 1 was appended to each seed's layout when the layout got its pipeline stage:
// a repeated embedded message merges. page_order PAGE_ORDER_HEAD_MAJOR was added to every
// layout by protoc --decode, a line after each page_bytes, and --encode.) To make another by hand:
// { printf '\x00'; protoc -Iproto
//   --encode=baton.internal.v1.TransferTicket proto/baton/internal/v1/kv_transfer.proto
//   < ticket.txtpb; } > corpus/transfer_ticket/NAME.bin
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "baton/internal/v1/kv_transfer.pb.h"
#include "transport/transfer_ticket.h"
#include "worker/transfer_ticket_proto.h"

namespace {

namespace pb = ::baton::internal::v1;
using baton::kvcache::PageLayout;
using baton::transport::TicketLimits;
using baton::transport::TransferComplete;
using baton::transport::TransferTicket;

void Require(bool cond) {
  if (!cond) std::abort();
}

// The seeds were built from these values (see the top), so the valid ones pass.
constexpr int64_t kNowMs = 1'700'000'000'000;
constexpr int32_t kVocab = 32000;

PageLayout LocalLayout() {
  PageLayout l;
  l.num_layers = 2;
  l.num_kv_heads = 4;
  l.head_dim = 4;
  l.block_size = 16;
  l.dtype = "f32";
  return l;
}

// The same model's pages cut in two tensor-parallel slices: a group's ranks.
std::vector<PageLayout> TwoSlices() {
  std::vector<PageLayout> out;
  for (int r = 0; r < 2; ++r) {
    PageLayout l = LocalLayout();
    l.num_kv_heads = 2;
    l.first_kv_head = 2 * r;
    l.tp_rank = r;
    l.tp_size = 2;
    out.push_back(l);
  }
  return out;
}

TicketLimits Limits() {
  TicketLimits limits;
  limits.max_prompt_tokens = 1 << 16;  // keeps the fuzzer's allocations small
  limits.max_ranks = 64;
  return limits;
}

// The receiver's own ticket, which a completion is checked against.
TransferTicket IssuedTicket() {
  TransferTicket t;
  t.request_id = "req-1";
  t.worker_address = "addr";
  t.rkey = "rkey";
  t.pool_base = 0x10000;
  t.layout = LocalLayout();
  t.pool_bytes = 64 * 4096;
  t.prompt_tokens = 40;
  t.first_block = 1;
  t.page_ids = {7, 3};
  t.cached_block_hashes = {std::string(32, 'h')};
  t.lease_deadline_unix_ms = kNowMs + 60'000;
  return t;
}

bool Known(absl::StatusCode code) {
  return code == absl::StatusCode::kInvalidArgument ||
         code == absl::StatusCode::kFailedPrecondition ||
         code == absl::StatusCode::kDeadlineExceeded || code == absl::StatusCode::kDataLoss;
}

void ExerciseTicket(const uint8_t* data, size_t size) {
  pb::TransferTicket wire;
  if (!wire.ParseFromArray(data, static_cast<int>(size))) return;
  const TicketLimits limits = Limits();
  absl::StatusOr<TransferTicket> ticket = baton::worker::FromProto(wire, limits);
  if (!ticket.ok()) {
    // A bound (InvalidArgument) or a page order not ours (FailedPrecondition).
    Require(ticket.status().code() == absl::StatusCode::kInvalidArgument ||
            ticket.status().code() == absl::StatusCode::kFailedPrecondition);
    Require(!ticket.status().message().empty());
    return;
  }
  Require(ticket->request_id.size() <= limits.max_request_id_bytes);
  Require(ticket->worker_address.size() <= limits.max_worker_address_bytes);
  Require(ticket->rkey.size() <= limits.max_rkey_bytes);
  Require(static_cast<int64_t>(ticket->page_ids.size()) <= limits.max_prompt_tokens);
  Require(static_cast<int64_t>(ticket->cached_block_hashes.size()) <= limits.max_prompt_tokens);

  absl::StatusOr<TransferTicket> round =
      baton::worker::FromProto(baton::worker::ToProto(*ticket), limits);
  Require(round.ok());
  Require(round->request_id == ticket->request_id &&
          round->worker_address == ticket->worker_address && round->rkey == ticket->rkey &&
          round->pool_base == ticket->pool_base && round->pool_bytes == ticket->pool_bytes &&
          round->layout == ticket->layout && round->prompt_tokens == ticket->prompt_tokens &&
          round->first_block == ticket->first_block && round->page_ids == ticket->page_ids &&
          round->cached_block_hashes == ticket->cached_block_hashes &&
          round->lease_deadline_unix_ms == ticket->lease_deadline_unix_ms);

  Require(ticket->ranks.size() <= limits.max_ranks);
  Require(round->ranks.size() == ticket->ranks.size());
  const absl::Time now = absl::FromUnixMillis(kNowMs);
  if (!ticket->ranks.empty()) {
    // A sliced ticket: a group sender of two slices checks it.
    const absl::Status sliced =
        baton::transport::ValidateSlicedTicket(*ticket, TwoSlices(), limits, now);
    Require(sliced.ok() || (Known(sliced.code()) && !sliced.message().empty()));
    if (sliced.ok()) {
      for (const auto& r : ticket->ranks) {
        const uint64_t pages = r.pool_bytes / static_cast<uint64_t>(r.layout.page_bytes());
        for (int32_t id : ticket->page_ids) Require(id >= 0 && static_cast<uint64_t>(id) < pages);
      }
    }
  }
  const PageLayout local = LocalLayout();
  const absl::Status valid = baton::transport::ValidateTicket(*ticket, local, limits, now);
  if (!valid.ok()) {
    Require(Known(valid.code()) && valid.code() != absl::StatusCode::kDataLoss);
    Require(!valid.message().empty());
    return;
  }
  // What the sender will rely on when it computes remote addresses.
  Require(ticket->layout == local);
  const uint64_t pages = ticket->pool_bytes / static_cast<uint64_t>(local.page_bytes());
  for (int32_t id : ticket->page_ids) {
    Require(id >= 0 && static_cast<uint64_t>(id) < pages);
  }
  Require(!ticket->page_ids.empty());
  Require(ticket->lease_deadline_unix_ms > kNowMs);

  // A completion that matches the accepted ticket passes. (A ticket that lists ranks is a
  // sliced one: its completion counts every rank's slice of a page, and a sender takes
  // the sliced checks above for it.)
  if (!ticket->ranks.empty()) return;
  TransferComplete complete;
  complete.request_id = ticket->request_id;
  complete.blocks_written = static_cast<int32_t>(ticket->page_ids.size());
  complete.bytes_written =
      static_cast<uint64_t>(complete.blocks_written) * static_cast<uint64_t>(local.page_bytes());
  Require(baton::transport::ValidateComplete(complete, *ticket, kVocab).ok());
}

void ExerciseComplete(const uint8_t* data, size_t size) {
  pb::TransferComplete wire;
  if (!wire.ParseFromArray(data, static_cast<int>(size))) return;
  const TicketLimits limits = Limits();
  absl::StatusOr<TransferComplete> complete = baton::worker::FromProto(wire, limits);
  if (!complete.ok()) {
    Require(complete.status().code() == absl::StatusCode::kInvalidArgument);
    return;
  }
  Require(complete->request_id.size() <= limits.max_request_id_bytes);
  absl::StatusOr<baton::engine::SampledToken> first =
      baton::worker::FirstTokenFromProto(wire, kVocab);
  if (first.ok()) {
    Require(first->id >= 0 && first->id < kVocab);
    Require(first->top_logprobs.size() <=
            static_cast<size_t>(baton::worker::kMaxFirstTokenTopLogprobs));
    for (const auto& [id, logprob] : first->top_logprobs) Require(id >= 0 && id < kVocab);
  } else {
    Require(first.status().code() == absl::StatusCode::kInvalidArgument);
  }
  const TransferTicket ticket = IssuedTicket();
  const absl::Status valid = baton::transport::ValidateComplete(*complete, ticket, kVocab);
  if (!valid.ok()) {
    Require(valid.code() == absl::StatusCode::kInvalidArgument ||
            valid.code() == absl::StatusCode::kDataLoss);
    Require(!valid.message().empty());
    return;
  }
  Require(complete->request_id == ticket.request_id);
  Require(static_cast<size_t>(complete->blocks_written) == ticket.page_ids.size());
  Require(complete->first_token >= 0 && complete->first_token < kVocab);
}

void ExerciseReserve(const uint8_t* data, size_t size) {
  pb::ReserveRequest wire;
  if (!wire.ParseFromArray(data, static_cast<int>(size))) return;
  const TicketLimits limits = Limits();
  // A group receiver of two slices takes sliced reservations only.
  const auto sliced = baton::worker::CheckReserveRequest(wire, TwoSlices(), limits);
  Require(sliced.ok() ? !sliced->empty()
                      : (Known(sliced.status().code()) && !sliced.status().message().empty()));
  const auto checked = baton::worker::CheckReserveRequest(wire, {LocalLayout()}, limits);
  const absl::Status valid = checked.status();
  if (!valid.ok()) {
    Require(valid.code() == absl::StatusCode::kInvalidArgument ||
            valid.code() == absl::StatusCode::kFailedPrecondition);
    Require(!valid.message().empty());
    return;
  }
  // What the receiver relies on before it hashes the prompt and reserves pages.
  Require(!wire.request_id().empty() && wire.request_id().size() <= limits.max_request_id_bytes);
  Require(wire.prompt_ids_size() <= limits.max_prompt_tokens);
  if (checked->empty()) {  // plain: the sender's one layout is ours
    absl::StatusOr<PageLayout> sender = baton::worker::FromProto(wire.sender_layout());
    Require(sender.ok() && *sender == LocalLayout());
  } else {
    Require(static_cast<int>(checked->size()) == wire.sender_ranks_size());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > (size_t{1} << 30)) return 0;  // ParseFromArray takes an int
  if (data[0] >= 0x80) {
    ExerciseReserve(data + 1, size - 1);
  } else if (data[0] % 2 == 0) {
    ExerciseTicket(data + 1, size - 1);
  } else {
    ExerciseComplete(data + 1, size - 1);
  }
  return 0;
}
