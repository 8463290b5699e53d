// The contract of one KV transfer between a decode worker (receiver) and a prefill worker
// (sender), as plain structs, and the checks each side runs on what its peer sent
// (architecture.md, "The life of a request" and "Page layout"). The wire forms are in
// proto/baton/internal/v1/kv_transfer.proto; worker/transfer_ticket_proto converts them.
//
// Protocol: the receiver reserves pages under a lease and returns a TransferTicket; the
// sender checks it (ValidateTicket), writes each layer's K/V of each prompt block it must
// send straight into those pages (UCX RMA put), then sends a TransferComplete, which the
// receiver checks (ValidateComplete) before it admits the sequence.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "kvcache/page_layout.h"

namespace baton::transport {

// What a page holds (kvcache/page_layout.h), as both sides must agree on it. A receiver
// refuses a layout it does not understand; it never guesses.
using kvcache::PageLayout;

// One rank's pool of a receiver in a sliced transfer (the sender or the receiver is a
// worker group): every rank holds its slice of each page under the same page ids.
struct RankPool {
  int32_t rank = 0;  // pp_rank * tp_size + tp_rank of `layout`
  std::string worker_address;
  std::string rkey;
  uint64_t pool_base = 0;
  uint64_t pool_bytes = 0;
  PageLayout layout;
};

// The receiver's answer to a reservation.
struct TransferTicket {
  std::string request_id;
  std::string worker_address;  // the receiver's UCX worker address (opaque bytes)
  std::string rkey;            // packed remote key of the receiver's whole page pool
  uint64_t pool_base = 0;      // remote address of page 0 of the pool
  uint64_t pool_bytes = 0;     // bytes registered: pool pages * page_bytes
  PageLayout layout;
  int64_t prompt_tokens = 0;
  // Prompt blocks [0, first_block) are already in the receiver's prefix cache; the
  // sender writes blocks first_block.. into page_ids[0..], in order. The last block may
  // be partial. page_ids.size() == ceil(prompt_tokens / block_size) - first_block.
  int32_t first_block = 0;
  std::vector<int32_t> page_ids;
  // The chained hashes (docs/prefix_cache.md) of the cached blocks [0, first_block), so
  // that the sender can check it computes the same prefix.
  std::vector<std::string> cached_block_hashes;
  int64_t lease_deadline_unix_ms = 0;  // the pages are freed after this
  // A sliced transfer: every rank of the receiver, in rank order (the fields above then
  // describe rank 0). Empty when both sides are one rank with one layout.
  std::vector<RankPool> ranks;
};

// What one sender rank wrote into one receiver rank (transport/kv_checksum.h,
// SliceKvChecksum).
struct SliceSum {
  int32_t sender_rank = 0;
  int32_t receiver_rank = 0;
  uint64_t checksum = 0;
  uint64_t bytes = 0;
  bool operator==(const SliceSum&) const = default;
};

// The sender's last message for a transfer.
struct TransferComplete {
  std::string request_id;
  int32_t first_token = 0;  // sampled by the prefill worker
  int32_t blocks_written = 0;
  uint64_t bytes_written = 0;
  // XXH3-64 over the bytes written, in the order written (block by block, layer by layer,
  // K then V). The receiver recomputes it over its pages.
  uint64_t checksum = 0;
  // A sliced transfer: one entry per (writing sender rank, receiver rank) pair that share
  // K/V (kvcache::SliceWriters); checksum is then 0.
  std::vector<SliceSum> slices;
};

struct TicketLimits {
  size_t max_worker_address_bytes = 4096;
  size_t max_rkey_bytes = 4096;
  size_t max_request_id_bytes = 256;
  int64_t max_prompt_tokens = 1 << 20;
  absl::Duration max_lease = absl::Minutes(10);
  size_t max_ranks = 4096;  // ranks of a group, on either side
};

// The sender's checks of a ticket against its own layout: every size, id and offset from
// the peer is bounded, the layout matches exactly (FailedPrecondition naming both sides),
// every page lies inside the registered pool, no page repeats, the lease has not expired
// and is not absurdly long. InvalidArgument names the field and the bound.
// A malformed layout (a dimension below 1, an unknown dtype, a tp_rank outside tp_size or
// a pp_rank outside pp_size, a negative first layer or head, a page size that overflows)
// is InvalidArgument; a well-formed one that
// differs from `local` is FailedPrecondition. A lease ending at or before `now` is
// DeadlineExceeded. The checks and their order: docs/transport.md.
absl::Status ValidateTicket(const TransferTicket& ticket, const PageLayout& local,
                            const TicketLimits& limits, absl::Time now);

// The sender's checks of a sliced ticket (ticket.ranks set) against its ranks' layouts
// `senders`: every rank's pool as ValidateTicket checks one (bounds, pages, lease), the
// ranks numbered 0.. in order, every rank compatible with every sender
// (kvcache::CheckSliceCompatible), and every receiver rank's page filled exactly once by
// the senders' writers (kvcache::CheckSliceCover).
// The first part of that: the ranks' pools alone.
absl::Status ValidateTicketRanks(const TransferTicket& ticket, const TicketLimits& limits,
                                 absl::Time now);
absl::Status ValidateSlicedTicket(const TransferTicket& ticket,
                                  const std::vector<PageLayout>& senders,
                                  const TicketLimits& limits, absl::Time now);

// The receiver's check of a sliced reservation: each sender rank's layout well formed
// (InvalidArgument naming sender_ranks[i]), compatible with the receiver's ranks, and
// together filling each receiver rank's page exactly once (FailedPrecondition).
absl::Status CheckSenderSlices(const std::vector<PageLayout>& senders,
                               const std::vector<PageLayout>& receivers);

// The (sender rank, receiver rank) pairs a sliced completion must carry, in sender-major
// order: writers only, pairs that share some K/V.
std::vector<std::pair<int32_t, int32_t>> ExpectedSlices(const std::vector<PageLayout>& senders,
                                                        const std::vector<PageLayout>& receivers);

// The receiver's check of the layout a sender says it writes (ReserveRequest
// .sender_layout): well formed (InvalidArgument naming sender_layout's field), and equal to
// `local` (FailedPrecondition naming the first field that differs, with both values).
absl::Status CheckSenderLayout(const PageLayout& sender, const PageLayout& local);

// The bytes of one page a transfer writes: the layout's, or for a sliced ticket the sum of
// every rank's slice. nullopt when a layout is malformed or the sum overflows.
std::optional<int64_t> TicketPageBytes(const TransferTicket& ticket);

// The receiver's checks of a completion against the ticket it issued: same request, the
// number of blocks and bytes it expects, a token id inside the vocabulary. A block or
// byte count mismatch is DataLoss, the rest InvalidArgument. The checksum is not checked
// here: the receiver recomputes it over its pages.
absl::Status ValidateComplete(const TransferComplete& complete, const TransferTicket& ticket,
                              int32_t vocab_size);

}  // namespace baton::transport
