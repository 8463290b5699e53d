#include "worker/remote_pools.h"

#include <utility>

#include "common/status.h"

namespace baton::worker {

absl::StatusOr<std::shared_ptr<RemotePool>> RemotePools::Get(const std::string& address,
                                                             const std::string& rkey, uint64_t base,
                                                             uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pools_.find(address);
  if (it != pools_.end()) {
    const RemotePool& p = *it->second;
    if (p.ep->health().ok() && p.rkey == rkey && p.base == base && p.bytes == bytes) {
      return it->second;
    }
    pools_.erase(it);
  }
  BATON_ASSIGN_OR_RETURN(std::unique_ptr<transport::UcxEndpoint> ep,
                         transport::UcxEndpoint::Connect(*ucx_, address));
  // Finish the connection handshake before the first put. Debian's UCX 1.13 asserts (and
  // aborts the receiver) when a peer dies while the receiver's handshake reply is still
  // queued (openucx/ucx#8175); a flushed endpoint has none queued.
  BATON_RETURN_IF_ERROR(ep->Flush(absl::Now() + flush_timeout_));
  auto pool = std::make_shared<RemotePool>();
  BATON_ASSIGN_OR_RETURN(pool->region, ep->ImportRegion(rkey, base, bytes));
  pool->ep = std::move(ep);
  pool->rkey = rkey;
  pool->base = base;
  pool->bytes = bytes;
  pools_[address] = pool;
  return pool;
}

}  // namespace baton::worker
