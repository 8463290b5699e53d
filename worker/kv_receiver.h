// The decode role's side of KV transfers: baton.internal.v1.KvTransfer (Reserve, Complete,
// Release) over an engine whose page pool is registered with UCX once, as a whole.
//
//   Reserve  -> engine.ReserveKv, a lease, and a ticket: this process's UCX address, the
//               pool's packed rkey, the page ids, the layout and the lease's deadline.
//   Complete -> the completion checked against the ticket (counts, then the checksum over
//               the pages), engine.CompleteKv, and a fresh lease until a Generate call
//               claims the transfer (Claim).
//   Release  -> the pages freed now. Unknown ids are fine: either leg may release on any
//               path.
//   KeepAlive-> a later deadline for a reservation still being written (long prompts).
// A lease that ends frees its pages (a thread watches the deadlines). Every number a peer
// sends is bounded before use (worker/transfer_ticket_proto.h, transport/transfer_ticket.h).
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "baton/internal/v1/kv_transfer.grpc.pb.h"
#include "engine/engine.h"
#include "engine/parallel/worker_group.h"
#include "grpcpp/grpcpp.h"
#include "service/internal_auth.h"
#include "transport/lease_table.h"
#include "transport/registered_region.h"
#include "transport/transfer_ticket.h"
#include "transport/ucx_worker.h"
#include "worker/worker_metrics.h"

namespace baton::worker {

struct KvReceiverOptions {
  absl::Duration default_lease = absl::Seconds(60);  // when the sender asks for none
  absl::Duration max_lease = absl::Minutes(10);      // what Reserve grants at most
  absl::Duration claim_lease = absl::Seconds(30);    // Complete to the Generate that claims
  int64_t max_leases = 4096;
  // The share of the pool's pages, and of max_leases, that one caller (service::CallerOf: a
  // prefill worker, by its certificate or its IP address) may hold reserved at once.
  double max_share_per_caller = 0.5;
  // Every KvTransfer call must pass its check first.
  std::shared_ptr<const service::InternalAuth> auth = service::InternalAuth::Open();
};

class KvReceiver {
 public:
  // Everything must outlive the receiver; `metrics` may be null. `pool` is the engine's
  // whole page pool, registered with `ucx` once for the process (the sender shares it).
  // `group`, when the engine is a worker group's leader, holds every rank's slice of the
  // pages: Create asks each rank for its pool, and Complete has each rank check its own.
  static absl::StatusOr<std::unique_ptr<KvReceiver>> Create(engine::Engine* engine,
                                                            transport::UcxWorker* ucx,
                                                            const transport::RegisteredRegion* pool,
                                                            const KvReceiverOptions& options,
                                                            WorkerMetrics* metrics,
                                                            engine::GroupBackend* group = nullptr);
  ~KvReceiver();  // stops the lease watcher and frees what is still reserved
  KvReceiver(const KvReceiver&) = delete;
  KvReceiver& operator=(const KvReceiver&) = delete;

  grpc::Service* service();

  // A Generate call takes over a completed transfer: its lease ends here and the engine
  // request that names it owns the pages. FailedPrecondition when the transfer is not
  // complete, expired, or was claimed already.
  absl::Status Claim(const std::string& transfer_id);

  // The same, for a Generate call opened before the transfer completed (the router opens
  // the decode stream together with the Prefill): calls `done` once the transfer is
  // complete and claimed (OK), or with the reason it never will be: it failed, was
  // released (Aborted), its lease ended, or `wait` passed (DeadlineExceeded). At once, on
  // this thread, when it is complete already; else on the thread that settles it. One
  // waiter per transfer id. Never called once CancelWait returned true.
  void ClaimWhenComplete(const std::string& transfer_id, absl::Duration wait,
                         std::function<void(absl::Status)> done);
  // Removes the waiter; false when it has been called (or is being called) already.
  bool CancelWait(const std::string& transfer_id);

  int64_t leases_held() const { return leases_.leases_held(); }
  int64_t pages_reserved() const { return leases_.pages_reserved(); }

 private:
  class Service;
  struct Transfer {
    transport::TransferTicket ticket;
    bool complete = false;
    std::vector<kvcache::PageLayout> senders;  // a sliced transfer's sender ranks
  };
  KvReceiver(engine::Engine* engine, transport::UcxWorker* ucx,
             const transport::RegisteredRegion* pool, const KvReceiverOptions& options,
             WorkerMetrics* metrics, engine::GroupBackend* group);
  absl::Status LoadRankPools();
  // A sliced completion's checksums, on every rank; the bytes they cover.
  absl::StatusOr<uint64_t> VerifySlices(const Transfer& transfer,
                                        const transport::TransferComplete& complete);
  // A Generate call waiting for its transfer (ClaimWhenComplete).
  struct Waiter {
    absl::Time deadline;
    absl::Duration wait;
    std::function<void(absl::Status)> done;
  };
  void WatchLeases();
  // Frees a transfer's pages and forgets it (the caller took its lease); a call waiting
  // for it gets `why`.
  void Drop(const std::string& transfer_id, const absl::Status& why);
  // Calls the waiter for `transfer_id`, if any, with `status`.
  void Settle(const std::string& transfer_id, const absl::Status& status);
  // Ends the waits whose deadline passed.
  void ExpireWaiters(absl::Time now);
  void UpdateGauges();

  absl::StatusOr<baton::internal::v1::TransferTicket> Reserve(
      const baton::internal::v1::ReserveRequest& request, std::string caller);
  absl::Status Complete(const baton::internal::v1::TransferComplete& complete);
  void Release(const std::string& transfer_id);
  absl::StatusOr<absl::Time> KeepAlive(const baton::internal::v1::KeepAliveRequest& request);

  engine::Engine* engine_;
  transport::UcxWorker* ucx_;
  KvReceiverOptions options_;
  WorkerMetrics* metrics_;
  kvcache::PageLayout layout_;
  const transport::RegisteredRegion* region_;
  engine::GroupBackend* group_;
  std::vector<transport::RankPool> rank_pools_;  // every rank's, in rank order
  std::vector<kvcache::PageLayout> rank_layouts_;
  transport::LeaseTable leases_;
  std::unique_ptr<Service> service_;

  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::map<std::string, Transfer, std::less<>> transfers_;
  std::map<std::string, Waiter, std::less<>> waiters_;
  std::thread watcher_;
};

}  // namespace baton::worker
