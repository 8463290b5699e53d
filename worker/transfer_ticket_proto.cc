#include "worker/transfer_ticket_proto.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "common/status.h"
#include "common/strings.h"

namespace baton::worker {
namespace {

namespace pb = ::baton::internal::v1;

absl::Status CheckSize(std::string_view field, size_t size, size_t max) {
  if (size > max) {
    return absl::InvalidArgumentError(StrCat(field, " is ", size, " bytes; the limit is ", max));
  }
  return absl::OkStatus();
}

absl::Status CheckCount(std::string_view field, int count, int64_t max) {
  if (count > max) {
    return absl::InvalidArgumentError(
        StrCat(field, " has ", count, " entries; the limit is ", max, " (max_prompt_tokens)"));
  }
  return absl::OkStatus();
}

absl::Status CheckLayout(std::string_view message, const pb::PageLayout& in) {
  if (in.page_order() != pb::PAGE_ORDER_HEAD_MAJOR) {
    const std::string name = pb::PageOrder_Name(in.page_order());  // empty when unknown
    return absl::FailedPreconditionError(
        StrCat(message, ".page_order is ", static_cast<int>(in.page_order()), " (",
               name.empty() ? "unknown" : name, ")",
               "; this worker's pages are PAGE_ORDER_HEAD_MAJOR (kvcache/page_layout.h): run "
               "the same Baton version on both pools"));
  }
  return CheckSize(StrCat(message, ".dtype"), in.dtype().size(), kMaxDtypeBytes);
}

kvcache::PageLayout CopyLayout(const pb::PageLayout& in) {
  kvcache::PageLayout out;
  out.num_layers = in.num_layers();
  out.num_kv_heads = in.num_kv_heads();
  out.head_dim = in.head_dim();
  out.block_size = in.block_size();
  out.dtype = in.dtype();
  out.first_layer = in.first_layer();
  out.first_kv_head = in.first_kv_head();
  out.tp_rank = in.tp_rank();
  out.tp_size = in.tp_size();
  out.pp_rank = in.pp_rank();
  out.pp_size = in.pp_size();
  return out;
}

// The wire's page_bytes restates the product of the other fields: a peer whose idea of a
// page differs is refused here, naming both numbers. A layout whose product cannot be
// computed is left to the layout checks (transport/transfer_ticket.h), which name the
// field at fault.
absl::Status CheckPageBytes(std::string_view message, const pb::PageLayout& in,
                            const kvcache::PageLayout& layout) {
  const std::optional<int64_t> want = layout.checked_page_bytes();
  if (want && in.page_bytes() != *want) {
    return absl::InvalidArgumentError(
        StrCat(message, ".page_bytes is ", in.page_bytes(), "; num_layers ", layout.num_layers,
               " * 2 * block_size ", layout.block_size, " * num_kv_heads ", layout.num_kv_heads,
               " * head_dim ", layout.head_dim, " * ", kvcache::DtypeBytes(layout.dtype), " (",
               layout.dtype, ") is ", *want));
  }
  return absl::OkStatus();
}

}  // namespace

void ToProto(const kvcache::PageLayout& layout, pb::PageLayout* out) {
  out->Clear();
  out->set_num_layers(layout.num_layers);
  out->set_num_kv_heads(layout.num_kv_heads);
  out->set_head_dim(layout.head_dim);
  out->set_block_size(layout.block_size);
  out->set_dtype(layout.dtype);
  out->set_first_layer(layout.first_layer);
  out->set_first_kv_head(layout.first_kv_head);
  out->set_tp_rank(layout.tp_rank);
  out->set_tp_size(layout.tp_size);
  out->set_pp_rank(layout.pp_rank);
  out->set_pp_size(layout.pp_size);
  out->set_page_bytes(layout.checked_page_bytes().value_or(0));
  out->set_page_order(pb::PAGE_ORDER_HEAD_MAJOR);
}

void ToProto(const transport::TransferTicket& ticket, pb::TransferTicket* out) {
  out->Clear();
  out->set_request_id(ticket.request_id);
  out->set_worker_address(ticket.worker_address);
  out->set_rkey(ticket.rkey);
  out->set_pool_base(ticket.pool_base);
  out->set_pool_bytes(ticket.pool_bytes);
  ToProto(ticket.layout, out->mutable_layout());
  out->set_prompt_tokens(ticket.prompt_tokens);
  out->set_first_block(ticket.first_block);
  out->mutable_page_ids()->Add(ticket.page_ids.begin(), ticket.page_ids.end());
  out->mutable_cached_block_hashes()->Reserve(static_cast<int>(ticket.cached_block_hashes.size()));
  for (const std::string& h : ticket.cached_block_hashes) out->add_cached_block_hashes(h);
  out->set_lease_deadline_unix_ms(ticket.lease_deadline_unix_ms);
  for (const transport::RankPool& r : ticket.ranks) ToProto(r, out->add_ranks());
}

void ToProto(const transport::RankPool& pool, pb::RankPool* out) {
  out->Clear();
  out->set_rank(pool.rank);
  out->set_worker_address(pool.worker_address);
  out->set_rkey(pool.rkey);
  out->set_pool_base(pool.pool_base);
  out->set_pool_bytes(pool.pool_bytes);
  ToProto(pool.layout, out->mutable_layout());
}

absl::StatusOr<transport::RankPool> FromProto(const pb::RankPool& in,
                                              const transport::TicketLimits& limits) {
  BATON_RETURN_IF_ERROR(CheckSize("RankPool.worker_address", in.worker_address().size(),
                                  limits.max_worker_address_bytes));
  BATON_RETURN_IF_ERROR(CheckSize("RankPool.rkey", in.rkey().size(), limits.max_rkey_bytes));
  BATON_RETURN_IF_ERROR(CheckLayout("RankPool.layout", in.layout()));
  transport::RankPool out;
  out.rank = in.rank();
  out.worker_address = in.worker_address();
  out.rkey = in.rkey();
  out.pool_base = in.pool_base();
  out.pool_bytes = in.pool_bytes();
  out.layout = CopyLayout(in.layout());
  BATON_RETURN_IF_ERROR(CheckPageBytes("RankPool.layout", in.layout(), out.layout));
  return out;
}

void ToProto(const transport::SliceSum& sum, pb::SliceChecksum* out) {
  out->set_sender_rank(sum.sender_rank);
  out->set_receiver_rank(sum.receiver_rank);
  out->set_checksum(sum.checksum);
  out->set_bytes(sum.bytes);
}

transport::SliceSum FromProto(const pb::SliceChecksum& in) {
  return {in.sender_rank(), in.receiver_rank(), in.checksum(), in.bytes()};
}

void ToProto(const transport::TransferComplete& complete, pb::TransferComplete* out) {
  out->Clear();
  out->set_request_id(complete.request_id);
  out->set_first_token(complete.first_token);
  out->set_blocks_written(complete.blocks_written);
  out->set_bytes_written(complete.bytes_written);
  out->set_checksum(complete.checksum);
  for (const transport::SliceSum& s : complete.slices) ToProto(s, out->add_slices());
}

pb::PageLayout ToProto(const kvcache::PageLayout& layout) {
  pb::PageLayout out;
  ToProto(layout, &out);
  return out;
}

pb::TransferTicket ToProto(const transport::TransferTicket& ticket) {
  pb::TransferTicket out;
  ToProto(ticket, &out);
  return out;
}

pb::TransferComplete ToProto(const transport::TransferComplete& complete) {
  pb::TransferComplete out;
  ToProto(complete, &out);
  return out;
}

absl::StatusOr<kvcache::PageLayout> FromProto(const pb::PageLayout& in) {
  BATON_RETURN_IF_ERROR(CheckLayout("PageLayout", in));
  kvcache::PageLayout out = CopyLayout(in);
  BATON_RETURN_IF_ERROR(CheckPageBytes("PageLayout", in, out));
  return out;
}

absl::StatusOr<transport::TransferTicket> FromProto(const pb::TransferTicket& in,
                                                    const transport::TicketLimits& limits) {
  // Bound everything first, so that nothing oversized is copied.
  BATON_RETURN_IF_ERROR(
      CheckSize("TransferTicket.request_id", in.request_id().size(), limits.max_request_id_bytes));
  BATON_RETURN_IF_ERROR(CheckSize("TransferTicket.worker_address", in.worker_address().size(),
                                  limits.max_worker_address_bytes));
  BATON_RETURN_IF_ERROR(CheckSize("TransferTicket.rkey", in.rkey().size(), limits.max_rkey_bytes));
  BATON_RETURN_IF_ERROR(CheckLayout("TransferTicket.layout", in.layout()));
  BATON_RETURN_IF_ERROR(
      CheckCount("TransferTicket.page_ids", in.page_ids_size(), limits.max_prompt_tokens));
  BATON_RETURN_IF_ERROR(CheckCount("TransferTicket.cached_block_hashes",
                                   in.cached_block_hashes_size(), limits.max_prompt_tokens));
  for (int i = 0; i < in.cached_block_hashes_size(); ++i) {
    if (in.cached_block_hashes(i).size() > kMaxBlockHashBytes) {
      return absl::InvalidArgumentError(StrCat("TransferTicket.cached_block_hashes[", i, "] is ",
                                               in.cached_block_hashes(i).size(),
                                               " bytes; the limit is ", kMaxBlockHashBytes));
    }
  }

  transport::TransferTicket out;
  out.request_id = in.request_id();
  out.worker_address = in.worker_address();
  out.rkey = in.rkey();
  out.pool_base = in.pool_base();
  out.pool_bytes = in.pool_bytes();
  out.layout = CopyLayout(in.layout());
  BATON_RETURN_IF_ERROR(CheckPageBytes("ticket.layout", in.layout(), out.layout));
  out.prompt_tokens = in.prompt_tokens();
  out.first_block = in.first_block();
  out.page_ids.assign(in.page_ids().begin(), in.page_ids().end());
  out.cached_block_hashes.assign(in.cached_block_hashes().begin(), in.cached_block_hashes().end());
  out.lease_deadline_unix_ms = in.lease_deadline_unix_ms();
  if (static_cast<size_t>(in.ranks_size()) > limits.max_ranks) {
    return absl::InvalidArgumentError(StrCat("TransferTicket.ranks has ", in.ranks_size(),
                                             " entries; the limit is ", limits.max_ranks));
  }
  for (const pb::RankPool& r : in.ranks()) {
    BATON_ASSIGN_OR_RETURN(transport::RankPool pool, FromProto(r, limits));
    out.ranks.push_back(std::move(pool));
  }
  return out;
}

absl::StatusOr<transport::TransferComplete> FromProto(const pb::TransferComplete& in,
                                                      const transport::TicketLimits& limits) {
  BATON_RETURN_IF_ERROR(CheckSize("TransferComplete.request_id", in.request_id().size(),
                                  limits.max_request_id_bytes));
  transport::TransferComplete out;
  out.request_id = in.request_id();
  out.first_token = in.first_token();
  out.blocks_written = in.blocks_written();
  out.bytes_written = in.bytes_written();
  out.checksum = in.checksum();
  // At most one entry per pair of ranks.
  const size_t max_slices = limits.max_ranks * limits.max_ranks;
  if (static_cast<size_t>(in.slices_size()) > max_slices) {
    return absl::InvalidArgumentError(StrCat("TransferComplete.slices has ", in.slices_size(),
                                             " entries; the limit is ", max_slices));
  }
  for (const pb::SliceChecksum& s : in.slices()) out.slices.push_back(FromProto(s));
  return out;
}

absl::StatusOr<engine::SampledToken> FirstTokenFromProto(const pb::TransferComplete& in,
                                                         int32_t vocab_size) {
  engine::SampledToken out;
  out.id = in.first_token();
  if (out.id < 0 || out.id >= vocab_size) {
    return absl::InvalidArgumentError(StrCat("TransferComplete.first_token is ", out.id,
                                             "; it must be in [0, ", vocab_size, ")"));
  }
  if (!in.has_first_token_logprob()) return out;
  const pb::TokenLogprob& lp = in.first_token_logprob();
  if (lp.token_id() != out.id) {
    return absl::InvalidArgumentError(StrCat("TransferComplete.first_token_logprob.token_id is ",
                                             lp.token_id(), "; first_token is ", out.id));
  }
  if (lp.top_size() > kMaxFirstTokenTopLogprobs) {
    return absl::InvalidArgumentError(StrCat("TransferComplete.first_token_logprob.top has ",
                                             lp.top_size(), " entries; the limit is ",
                                             kMaxFirstTokenTopLogprobs));
  }
  out.logprob = lp.logprob();
  for (const pb::TopLogprob& top : lp.top()) {
    if (top.token_id() < 0 || top.token_id() >= vocab_size) {
      return absl::InvalidArgumentError(StrCat("TransferComplete.first_token_logprob.top token ",
                                               top.token_id(), " is outside [0, ", vocab_size,
                                               ")"));
    }
    out.top_logprobs.emplace_back(top.token_id(), top.logprob());
  }
  return out;
}

absl::StatusOr<std::vector<kvcache::PageLayout>> CheckReserveRequest(
    const pb::ReserveRequest& req, const std::vector<kvcache::PageLayout>& receivers,
    const transport::TicketLimits& limits) {
  if (req.request_id().empty() || req.request_id().size() > limits.max_request_id_bytes) {
    return absl::InvalidArgumentError(StrCat("ReserveRequest.request_id is ",
                                             req.request_id().size(), " bytes; it must be 1 to ",
                                             limits.max_request_id_bytes));
  }
  if (req.prompt_ids_size() > limits.max_prompt_tokens) {
    return absl::InvalidArgumentError(StrCat("ReserveRequest.prompt_ids has ",
                                             req.prompt_ids_size(), " ids; the limit is ",
                                             limits.max_prompt_tokens));
  }
  if (req.cache_salt().size() > 1024) {
    return absl::InvalidArgumentError(StrCat("ReserveRequest.cache_salt is ",
                                             req.cache_salt().size(), " bytes; the limit is 1024"));
  }
  if (static_cast<size_t>(req.sender_ranks_size()) > limits.max_ranks) {
    return absl::InvalidArgumentError(StrCat("ReserveRequest.sender_ranks has ",
                                             req.sender_ranks_size(), " entries; the limit is ",
                                             limits.max_ranks));
  }
  std::vector<kvcache::PageLayout> senders;
  for (int i = 0; i < req.sender_ranks_size(); ++i) {
    absl::StatusOr<kvcache::PageLayout> l = FromProto(req.sender_ranks(i));
    if (!l.ok()) {
      return absl::InvalidArgumentError(
          StrCat("ReserveRequest.sender_ranks[", i, "]: ", l.status().message()));
    }
    senders.push_back(*std::move(l));
  }
  const bool plain = receivers.size() == 1 && senders.size() <= 1 &&
                     (senders.empty() || senders[0] == receivers[0]);
  if (plain) {
    BATON_ASSIGN_OR_RETURN(kvcache::PageLayout sender, FromProto(req.sender_layout()));
    BATON_RETURN_IF_ERROR(transport::CheckSenderLayout(sender, receivers[0]));
    return std::vector<kvcache::PageLayout>();
  }
  if (senders.empty()) {
    return absl::FailedPreconditionError(
        StrCat("this decode worker is a group of ", receivers.size(),
               " ranks and the sender did not list its ranks' layouts (sender_ranks); upgrade "
               "the prefill worker, or run decode with --tensor-parallel-size 1 "
               "--pipeline-parallel-size 1"));
  }
  BATON_RETURN_IF_ERROR(transport::CheckSenderSlices(senders, receivers));
  return senders;
}

}  // namespace baton::worker
