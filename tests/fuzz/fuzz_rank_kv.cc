// What a rank of a worker group reads from its leader for KV transfers
// (proto/baton/internal/v1/rank_kv.proto): any bytes give a call or an error. A verify call
// is checked over a small real pool (worker::VerifySliceSums), which must bound every page,
// rank and count it is given; a begin call's ticket goes through the same bounded decoding
// and rank checks a rank runs (worker::FromProto, transport::ValidateTicketRanks).
//
// Seeds (corpus/rank_kv): `verify` (a 20-token prompt from block 1 in pages 3 and 5, one
// sender rank of the pool's layout) and `begin` (a two-rank sliced ticket), made with
//   protoc -Iproto --encode=baton.internal.v1.RankKvCall proto/baton/internal/v1/rank_kv.proto
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "absl/time/time.h"
#include "baton/internal/v1/rank_kv.pb.h"
#include "transport/transfer_ticket.h"
#include "worker/rank_kv.h"
#include "worker/transfer_ticket_proto.h"

namespace {

namespace pb = ::baton::internal::v1;

void Require(bool cond) {
  if (!cond) std::abort();
}

baton::kvcache::PageLayout Local() {
  baton::kvcache::PageLayout l;
  l.num_layers = 2;
  l.num_kv_heads = 2;
  l.head_dim = 4;
  l.block_size = 8;
  return l;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (size_t{1} << 20)) return 0;
  pb::RankKvCall call;
  if (!call.ParseFromArray(data, static_cast<int>(size))) return 0;
  if (call.has_verify()) {
    constexpr int64_t kPages = 8;
    const baton::kvcache::PageLayout local = Local();
    std::vector<float> pool(static_cast<size_t>(kPages * local.elements_per_block()), 0.5f);
    const absl::Status s =
        baton::worker::VerifySliceSums(pool.data(), kPages, local, 0, call.verify());
    Require(s.ok() || !s.message().empty());
  }
  if (call.has_begin()) {
    baton::transport::TicketLimits limits;
    limits.max_prompt_tokens = 1 << 16;
    limits.max_ranks = 64;
    auto ticket = baton::worker::FromProto(call.begin().ticket(), limits);
    if (ticket.ok()) {
      Require(ticket->ranks.size() <= limits.max_ranks);
      const absl::Status s = baton::transport::ValidateTicketRanks(
          *ticket, limits, absl::FromUnixMillis(1'700'000'000'000));
      Require(s.ok() || !s.message().empty());
    }
  }
  return 0;
}
