#include "transport/transfer_ticket.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/status.h"
#include "common/strings.h"
#include "kvcache/slice_copy.h"

namespace baton::transport {
namespace {

// A block hash is a SHA-256 value (docs/prefix_cache.md).
constexpr size_t kBlockHashBytes = 32;

absl::Status CheckBytes(std::string_view field, size_t size, size_t max) {
  if (size == 0) {
    return absl::InvalidArgumentError(
        StrCat("ticket.", field, " is empty; it must be 1 to ", max, " bytes"));
  }
  if (size > max) {
    return absl::InvalidArgumentError(
        StrCat("ticket.", field, " is ", size, " bytes; the limit is ", max));
  }
  return absl::OkStatus();
}

// The checks of a layout on its own: every dimension positive, a known dtype, a TP rank
// inside its group, no negative offset, and a page size that does not overflow.
absl::Status CheckLayoutSane(const PageLayout& layout, std::string_view field = "ticket.layout") {
  const struct {
    const char* name;
    int64_t value;
  } dims[] = {{"num_layers", layout.num_layers},
              {"num_kv_heads", layout.num_kv_heads},
              {"head_dim", layout.head_dim},
              {"block_size", layout.block_size}};
  for (const auto& dim : dims) {
    if (dim.value <= 0) {
      return absl::InvalidArgumentError(
          StrCat(field, ".", dim.name, " is ", dim.value, "; it must be at least 1"));
    }
  }
  const int64_t elem = kvcache::DtypeBytes(layout.dtype);
  if (elem <= 0) {
    // The dtype comes from a peer: quote it only when it is short and printable.
    const bool printable =
        layout.dtype.size() <= 16 && std::all_of(layout.dtype.begin(), layout.dtype.end(),
                                                 [](char c) { return c >= 0x20 && c < 0x7f; });
    return absl::InvalidArgumentError(
        StrCat(field, ".dtype is ",
               printable ? StrCat("'", layout.dtype, "'") : StrCat(layout.dtype.size(), " bytes"),
               "; it must be one of f32, bf16, f16"));
  }
  const struct {
    const char* rank_name;
    int32_t rank;
    const char* size_name;
    int32_t size;
  } groups[] = {{"tp_rank", layout.tp_rank, "tp_size", layout.tp_size},
                {"pp_rank", layout.pp_rank, "pp_size", layout.pp_size}};
  for (const auto& g : groups) {
    if (g.size < 1) {
      return absl::InvalidArgumentError(
          StrCat(field, ".", g.size_name, " is ", g.size, "; it must be at least 1"));
    }
    if (g.rank < 0 || g.rank >= g.size) {
      return absl::InvalidArgumentError(StrCat(field, ".", g.rank_name, " is ", g.rank,
                                               "; it must be in [0, ", g.size_name, " ", g.size,
                                               ")"));
    }
  }
  // A model has far fewer layers and heads. With the page-size check below (which bounds
  // the counts), this keeps first + count from overflowing.
  constexpr int64_t kMaxOffset = int64_t{1} << 24;
  if (layout.first_layer < 0 || layout.first_kv_head < 0 || layout.first_layer >= kMaxOffset ||
      layout.first_kv_head >= kMaxOffset) {
    return absl::InvalidArgumentError(StrCat(field, ".first_layer is ", layout.first_layer,
                                             " and first_kv_head ", layout.first_kv_head,
                                             "; each must be in [0, ", kMaxOffset, ")"));
  }
  if (!layout.checked_page_bytes()) {
    return absl::InvalidArgumentError(
        StrCat(field,
               ": num_layers * 2 * block_size * num_kv_heads * head_dim * dtype bytes "
               "overflows int64"));
  }
  return absl::OkStatus();
}

// The first field in which the receiver's layout differs from this worker's, as
// FailedPrecondition naming both values; OK when they are equal.
absl::Status CheckLayoutMatches(const PageLayout& theirs, const PageLayout& ours,
                                std::string_view who = "receiver") {
  const auto differs = [who](std::string_view field, const auto& a, const auto& b) {
    return absl::FailedPreconditionError(StrCat("the ", who, "'s page layout differs: ", field, " ",
                                                a, " (", who, ") vs ", b, " (this worker)"));
  };
  if (theirs.num_layers != ours.num_layers) {
    return differs("num_layers", theirs.num_layers, ours.num_layers);
  }
  if (theirs.num_kv_heads != ours.num_kv_heads) {
    return differs("num_kv_heads", theirs.num_kv_heads, ours.num_kv_heads);
  }
  if (theirs.head_dim != ours.head_dim) return differs("head_dim", theirs.head_dim, ours.head_dim);
  if (theirs.block_size != ours.block_size) {
    return differs("block_size", theirs.block_size, ours.block_size);
  }
  if (theirs.dtype != ours.dtype) {
    return absl::FailedPreconditionError(
        StrCat(differs("dtype", theirs.dtype, ours.dtype).message(),
               "; KV pages cross only between workers of one element type: start the prefill "
               "and decode workers with the same --kv-cache-dtype"));
  }
  if (theirs.first_layer != ours.first_layer) {
    return differs("first_layer", theirs.first_layer, ours.first_layer);
  }
  if (theirs.first_kv_head != ours.first_kv_head) {
    return differs("first_kv_head", theirs.first_kv_head, ours.first_kv_head);
  }
  if (theirs.tp_rank != ours.tp_rank) return differs("tp_rank", theirs.tp_rank, ours.tp_rank);
  if (theirs.tp_size != ours.tp_size) return differs("tp_size", theirs.tp_size, ours.tp_size);
  if (theirs.pp_rank != ours.pp_rank) return differs("pp_rank", theirs.pp_rank, ours.pp_rank);
  if (theirs.pp_size != ours.pp_size) return differs("pp_size", theirs.pp_size, ours.pp_size);
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckSenderLayout(const PageLayout& sender, const PageLayout& local) {
  BATON_RETURN_IF_ERROR(CheckLayoutSane(sender, "sender_layout"));
  return CheckLayoutMatches(sender, local, "sender");
}

absl::Status ValidateTicket(const TransferTicket& ticket, const PageLayout& local,
                            const TicketLimits& limits, absl::Time now) {
  // Opaque byte strings: present and bounded.
  BATON_RETURN_IF_ERROR(
      CheckBytes("request_id", ticket.request_id.size(), limits.max_request_id_bytes));
  BATON_RETURN_IF_ERROR(
      CheckBytes("worker_address", ticket.worker_address.size(), limits.max_worker_address_bytes));
  BATON_RETURN_IF_ERROR(CheckBytes("rkey", ticket.rkey.size(), limits.max_rkey_bytes));

  // The layout: well formed first (InvalidArgument), then the same as ours
  // (FailedPrecondition). After this, ticket.layout == local and both are sane.
  const PageLayout& layout = ticket.layout;
  BATON_RETURN_IF_ERROR(CheckLayoutSane(layout));
  BATON_RETURN_IF_ERROR(CheckLayoutMatches(layout, local));

  // The registered pool: whole pages, and an address range that does not wrap.
  const uint64_t page_bytes = static_cast<uint64_t>(layout.page_bytes());
  if (ticket.pool_bytes == 0) {
    return absl::InvalidArgumentError("ticket.pool_bytes is 0; the pool holds at least one page");
  }
  if (ticket.pool_bytes % page_bytes != 0) {
    return absl::InvalidArgumentError(StrCat("ticket.pool_bytes is ", ticket.pool_bytes,
                                             "; it must be a multiple of page_bytes ", page_bytes));
  }
  uint64_t pool_end = 0;
  if (__builtin_add_overflow(ticket.pool_base, ticket.pool_bytes, &pool_end)) {
    return absl::InvalidArgumentError(StrCat("ticket.pool_base ", ticket.pool_base,
                                             " + pool_bytes ", ticket.pool_bytes,
                                             " overflows the 64-bit address space"));
  }
  const uint64_t pool_pages = ticket.pool_bytes / page_bytes;

  // The prompt and its blocks.
  if (ticket.prompt_tokens <= 0 || ticket.prompt_tokens > limits.max_prompt_tokens) {
    return absl::InvalidArgumentError(StrCat("ticket.prompt_tokens is ", ticket.prompt_tokens,
                                             "; it must be in [1, ", limits.max_prompt_tokens,
                                             "]"));
  }
  // ceil(prompt_tokens / block_size), written so that it cannot overflow.
  const int64_t blocks = (ticket.prompt_tokens - 1) / layout.block_size + 1;
  if (ticket.first_block < 0 || ticket.first_block >= blocks) {
    return absl::InvalidArgumentError(
        StrCat("ticket.first_block is ", ticket.first_block, "; it must be in [0, ", blocks,
               ") since the prompt's ", ticket.prompt_tokens, " tokens make ", blocks,
               " blocks of block_size ", layout.block_size, " and the last block is always sent"));
  }
  const int64_t want_pages = blocks - ticket.first_block;
  if (static_cast<int64_t>(ticket.page_ids.size()) != want_pages) {
    return absl::InvalidArgumentError(StrCat("ticket.page_ids has ", ticket.page_ids.size(),
                                             " entries; blocks ", ticket.first_block, " to ",
                                             blocks - 1, " need exactly ", want_pages));
  }
  if (static_cast<int64_t>(ticket.cached_block_hashes.size()) != ticket.first_block) {
    return absl::InvalidArgumentError(StrCat(
        "ticket.cached_block_hashes has ", ticket.cached_block_hashes.size(),
        " entries; first_block ", ticket.first_block, " needs exactly ", ticket.first_block));
  }
  for (size_t i = 0; i < ticket.cached_block_hashes.size(); ++i) {
    if (ticket.cached_block_hashes[i].size() != kBlockHashBytes) {
      return absl::InvalidArgumentError(
          StrCat("ticket.cached_block_hashes[", i, "] is ", ticket.cached_block_hashes[i].size(),
                 " bytes; a block hash is exactly ", kBlockHashBytes));
    }
  }

  // Every page inside the pool, none twice.
  for (size_t i = 0; i < ticket.page_ids.size(); ++i) {
    const int32_t id = ticket.page_ids[i];
    if (id < 0 || static_cast<uint64_t>(id) >= pool_pages) {
      return absl::InvalidArgumentError(
          StrCat("ticket.page_ids[", i, "] is ", id, "; the pool has ", pool_pages, " pages"));
    }
  }
  std::vector<int32_t> sorted(ticket.page_ids);
  std::sort(sorted.begin(), sorted.end());
  const auto dup = std::adjacent_find(sorted.begin(), sorted.end());
  if (dup != sorted.end()) {
    const auto first = std::find(ticket.page_ids.begin(), ticket.page_ids.end(), *dup);
    const auto second = std::find(first + 1, ticket.page_ids.end(), *dup);
    return absl::InvalidArgumentError(StrCat(
        "ticket.page_ids[", second - ticket.page_ids.begin(), "] is ", *dup, ", as is page_ids[",
        first - ticket.page_ids.begin(), "]; each page is written once"));
  }

  // The lease: still running, and not longer than we would ever grant.
  const int64_t now_ms = absl::ToUnixMillis(now);
  const int64_t deadline = ticket.lease_deadline_unix_ms;
  if (deadline <= now_ms) {
    int64_t ago = 0;
    if (__builtin_sub_overflow(now_ms, deadline, &ago)) ago = std::numeric_limits<int64_t>::max();
    return absl::DeadlineExceededError(StrCat("ticket.lease_deadline_unix_ms is ", deadline,
                                              "; the lease ended ", ago, " ms ago (now ", now_ms,
                                              ")"));
  }
  const int64_t max_lease_ms = absl::ToInt64Milliseconds(limits.max_lease);
  int64_t latest = 0;
  if (__builtin_add_overflow(now_ms, max_lease_ms, &latest)) {
    latest = std::numeric_limits<int64_t>::max();
  }
  if (deadline > latest) {
    return absl::InvalidArgumentError(
        StrCat("ticket.lease_deadline_unix_ms is ", deadline, ", ", deadline - now_ms,
               " ms from now; a lease lasts at most ", max_lease_ms, " ms"));
  }
  return absl::OkStatus();
}

std::optional<int64_t> TicketPageBytes(const TransferTicket& ticket) {
  if (ticket.ranks.empty()) return ticket.layout.checked_page_bytes();
  int64_t sum = 0;  // every rank's slice of each page
  for (const RankPool& r : ticket.ranks) {
    const std::optional<int64_t> b = r.layout.checked_page_bytes();
    if (!b || __builtin_add_overflow(sum, *b, &sum)) return std::nullopt;
  }
  return sum;
}

absl::Status ValidateComplete(const TransferComplete& complete, const TransferTicket& ticket,
                              int32_t vocab_size) {
  if (complete.request_id != ticket.request_id) {
    // Both ids are peer bytes: say how they differ in size, not what they hold.
    return absl::InvalidArgumentError(StrCat("complete.request_id (", complete.request_id.size(),
                                             " bytes) is not the ticket's request_id (",
                                             ticket.request_id.size(), " bytes)"));
  }
  if (complete.blocks_written < 0 ||
      static_cast<uint64_t>(complete.blocks_written) != ticket.page_ids.size()) {
    return absl::DataLossError(StrCat("complete.blocks_written is ", complete.blocks_written,
                                      "; the ticket has ", ticket.page_ids.size(), " pages"));
  }
  uint64_t want_bytes = 0;
  const std::optional<int64_t> page_bytes = TicketPageBytes(ticket);
  if (!page_bytes || __builtin_mul_overflow(static_cast<uint64_t>(complete.blocks_written),
                                            static_cast<uint64_t>(*page_bytes), &want_bytes)) {
    return absl::InvalidArgumentError(StrCat("the ticket's page size times blocks_written ",
                                             complete.blocks_written, " is not a byte count"));
  }
  if (complete.bytes_written != want_bytes) {
    return absl::DataLossError(StrCat("complete.bytes_written is ", complete.bytes_written,
                                      "; blocks_written ", complete.blocks_written,
                                      " * page_bytes ", *page_bytes, " is ", want_bytes));
  }
  if (complete.first_token < 0 || complete.first_token >= vocab_size) {
    return absl::InvalidArgumentError(StrCat("complete.first_token is ", complete.first_token,
                                             "; it must be in [0, vocab_size ", vocab_size, ")"));
  }
  return absl::OkStatus();
}

absl::Status ValidateTicketRanks(const TransferTicket& ticket, const TicketLimits& limits,
                                 absl::Time now) {
  if (ticket.ranks.empty() || ticket.ranks.size() > limits.max_ranks) {
    return absl::InvalidArgumentError(StrCat("ticket.ranks has ", ticket.ranks.size(),
                                             " entries; a sliced ticket has 1 to ",
                                             limits.max_ranks));
  }
  for (size_t i = 0; i < ticket.ranks.size(); ++i) {
    const RankPool& r = ticket.ranks[i];
    if (r.rank != static_cast<int32_t>(i)) {
      return absl::InvalidArgumentError(
          StrCat("ticket.ranks[", i, "].rank is ", r.rank, "; the ranks come in order from 0"));
    }
    // The rank its layout says it is (the layout's own bounds are ValidateTicket's below).
    const int64_t placed = int64_t{r.layout.pp_rank} * r.layout.tp_size + r.layout.tp_rank;
    if (placed != r.rank) {
      return absl::InvalidArgumentError(StrCat("ticket.ranks[", i, "].layout is pp_rank ",
                                               r.layout.pp_rank, " x tp_size ", r.layout.tp_size,
                                               " + tp_rank ", r.layout.tp_rank, " = ", placed,
                                               "; it must be the rank, ", r.rank));
    }
    // Each rank's pool is checked as a one-rank ticket's is.
    TransferTicket one = ticket;
    one.ranks.clear();
    one.worker_address = r.worker_address;
    one.rkey = r.rkey;
    one.pool_base = r.pool_base;
    one.pool_bytes = r.pool_bytes;
    one.layout = r.layout;
    if (absl::Status s = ValidateTicket(one, r.layout, limits, now); !s.ok()) {
      return absl::Status(s.code(), StrCat("ticket.ranks[", i, "]: ", s.message()));
    }
    if (r.layout.block_size != ticket.ranks[0].layout.block_size) {
      return absl::InvalidArgumentError(StrCat("ticket.ranks[", i, "].layout.block_size is ",
                                               r.layout.block_size, "; rank 0's is ",
                                               ticket.ranks[0].layout.block_size));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateSlicedTicket(const TransferTicket& ticket,
                                  const std::vector<PageLayout>& senders,
                                  const TicketLimits& limits, absl::Time now) {
  BATON_RETURN_IF_ERROR(ValidateTicketRanks(ticket, limits, now));
  std::vector<PageLayout> receivers;
  for (const RankPool& r : ticket.ranks) receivers.push_back(r.layout);
  return CheckSenderSlices(senders, receivers);
}

absl::Status CheckSenderSlices(const std::vector<PageLayout>& senders,
                               const std::vector<PageLayout>& receivers) {
  for (size_t i = 0; i < senders.size(); ++i) {
    BATON_RETURN_IF_ERROR(CheckLayoutSane(senders[i], StrCat("sender_ranks[", i, "]")));
    for (const PageLayout& r : receivers) {
      BATON_RETURN_IF_ERROR(kvcache::CheckSliceCompatible(senders[i], r));
    }
  }
  for (const PageLayout& r : receivers) BATON_RETURN_IF_ERROR(kvcache::CheckSliceCover(senders, r));
  return absl::OkStatus();
}

std::vector<std::pair<int32_t, int32_t>> ExpectedSlices(const std::vector<PageLayout>& senders,
                                                        const std::vector<PageLayout>& receivers) {
  std::vector<std::pair<int32_t, int32_t>> out;
  const std::vector<bool> writers = kvcache::SliceWriters(senders);
  for (size_t s = 0; s < senders.size(); ++s) {
    if (!writers[s]) continue;
    for (size_t r = 0; r < receivers.size(); ++r) {
      if (!kvcache::SliceCopyRuns(senders[s], receivers[r]).empty()) {
        out.emplace_back(static_cast<int32_t>(s), static_cast<int32_t>(r));
      }
    }
  }
  return out;
}

}  // namespace baton::transport
