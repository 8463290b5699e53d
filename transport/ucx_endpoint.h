// A connection to a peer's UCP worker, and RMA puts into the peer's registered memory.
// A peer that dies fails the endpoint (peer error handling, where the transports have
// it), and every wait has a deadline, so every operation ends: with its result or an
// error, never a hang.
//
//   BATON_ASSIGN_OR_RETURN(auto ep, UcxEndpoint::Connect(ucx, ticket.worker_address));
//   BATON_ASSIGN_OR_RETURN(auto pool, ep->ImportRegion(ticket.rkey, base, bytes));
//   BATON_RETURN_IF_ERROR(ep->Put(src, n, pool, offset));   // posted, not yet done
//   BATON_RETURN_IF_ERROR(ep->Flush(deadline));             // every put landed
//
// Where UCX has no native RMA to the peer (tcp), puts go as messages (put_message.h).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "transport/registered_region.h"
#include "transport/ucx_worker.h"

namespace baton::transport {

// A peer's registered memory, as this endpoint can write it.
class RemoteRegion {
 public:
  ~RemoteRegion();
  RemoteRegion(const RemoteRegion&) = delete;
  RemoteRegion& operator=(const RemoteRegion&) = delete;
  uint64_t base() const { return base_; }
  uint64_t bytes() const { return bytes_; }
  // Whether the peer's memory is mapped into this process (shared memory: UCX's
  // ucp_rkey_ptr), so that a put is a plain copy (docs/transport.md, "Direct copies").
  bool mapped() const { return mapped_ != nullptr; }
  // Whether puts into it go as messages that the peer copies into place (put_message.h):
  // where it is not mapped, the worker sends puts as messages, and the peer accepts them.
  bool messaged() const { return put_key_ != 0; }

 private:
  friend class UcxEndpoint;
  RemoteRegion() = default;
  ucp_rkey_h rkey_ = nullptr;
  std::byte* mapped_ = nullptr;  // the peer's `base` in this process, or null
  uint64_t put_key_ = 0;         // the peer's PutTargets key when messaged(), else 0
  uint64_t put_offset_ = 0;      // base_ - the registered region's base, for messages
  uint64_t base_ = 0;
  uint64_t bytes_ = 0;
};

class UcxEndpoint {
 public:
  static absl::StatusOr<std::unique_ptr<UcxEndpoint>> Connect(UcxWorker& ucx,
                                                              std::string_view peer_address);
  // Closes the connection, waiting at most a second for outstanding operations.
  ~UcxEndpoint();
  UcxEndpoint(const UcxEndpoint&) = delete;
  UcxEndpoint& operator=(const UcxEndpoint&) = delete;

  // Unpacks a peer's remote key for [base, base + bytes) of its memory.
  absl::StatusOr<std::unique_ptr<RemoteRegion>> ImportRegion(std::string_view packed_rkey,
                                                             uint64_t base, uint64_t bytes);
  // Posts a write of [local, local + bytes) to `offset` in `remote`; it may still be in
  // flight when this returns (into a mapped() region it is a copy, done on return). `local_region`,
  // when given, is the registration that holds `local` (saves UCX a registration lookup).
  // OutOfRange when it does not fit.
  absl::Status Put(const void* local, size_t bytes, const RemoteRegion& remote, uint64_t offset,
                   const RegisteredRegion* local_region = nullptr);
  // Waits until every put posted before it has landed in the peer's memory. After messaged
  // puts that takes a round trip: a fence message, which the peer answers once it has
  // handled every message before it.
  absl::Status Flush(absl::Time deadline);
  // Unavailable once the peer has failed (it died, or the connection broke).
  absl::Status health() const;
  // False where the transports cannot notice a dead peer (Debian's shared memory): then
  // only the deadlines of Flush and the lease end a transfer to it.
  bool detects_peer_failure() const { return detects_peer_failure_; }

 private:
  explicit UcxEndpoint(UcxWorker& ucx) : ucx_(ucx) {}
  static void OnError(void* arg, ucp_ep_h ep, ucs_status_t status);

  UcxWorker& ucx_;
  ucp_ep_h ep_ = nullptr;
  // Put() into a messaged() region.
  absl::Status PutMessage(const void* local, size_t bytes, const RemoteRegion& remote,
                          uint64_t offset);
  // Sends a fence and waits for its answer (Flush after messaged puts).
  absl::Status Fence(absl::Time deadline);

  std::atomic<int> failed_status_{UCS_OK};  // the endpoint's first error
  bool detects_peer_failure_ = true;
  // The first failed send of a put message (UCX completes it later, maybe after this
  // endpoint is gone: hence shared).
  std::shared_ptr<std::atomic<int>> send_status_ = std::make_shared<std::atomic<int>>(UCS_OK);
  std::atomic<bool> sent_messages_{false};  // Flush then fences
  std::mutex fences_mu_;
  std::vector<uint64_t> open_fences_;  // failed with the endpoint (OnError)
};

}  // namespace baton::transport
