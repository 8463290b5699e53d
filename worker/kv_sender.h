// The prefill role's side of KV transfers: runs baton.internal.v1.Worker/Prefill. For one
// request it asks the decode worker to Reserve pages, checks the ticket, runs the prompt in
// the engine with a UcxKvSink that writes each layer's K/V into those pages as it is
// computed, and sends Complete with the first token and the checksum. On any failure
// (the decode worker refuses or dies, the transfer breaks, the caller cancels) the engine
// request stops and the reservation is released, so both sides free their pages.
//
// gRPC channels to decode workers and UCX endpoints to their workers are kept and reused;
// an endpoint whose peer failed is dropped and reconnected on next use.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "baton/internal/v1/kv_transfer.grpc.pb.h"
#include "baton/internal/v1/worker.pb.h"
#include "engine/engine.h"
#include "engine/parallel/worker_group.h"
#include "grpcpp/grpcpp.h"
#include "service/internal_auth.h"
#include "transport/registered_region.h"
#include "transport/transfer_ticket.h"
#include "transport/ucx_endpoint.h"
#include "transport/ucx_worker.h"
#include "worker/push_sink.h"
#include "worker/remote_pools.h"
#include "worker/worker_metrics.h"

namespace baton::worker {

struct KvSenderOptions {
  absl::Duration rpc_timeout = absl::Seconds(10);    // Reserve, Complete, Release
  absl::Duration flush_timeout = absl::Seconds(10);  // puts of one step to land
  // What the sender presents to decode workers' KvTransfer.
  std::shared_ptr<const service::InternalAuth> auth = service::InternalAuth::Open();
};

// A sender that is a worker group: its backend (to begin and end pushes on every rank)
// and every rank's page layout, in rank order.
struct SenderGroup {
  engine::GroupBackend* backend = nullptr;
  std::vector<kvcache::PageLayout> layouts;
};

class KvSender {
 public:
  // Everything must outlive the sender; `metrics` may be null. `pool` is the engine's
  // whole page pool, registered with `ucx` once for the process (the puts' source).
  KvSender(engine::Engine* engine, transport::UcxWorker* ucx,
           const transport::RegisteredRegion* pool, const KvSenderOptions& options,
           WorkerMetrics* metrics, SenderGroup group = {});
  ~KvSender();
  KvSender(const KvSender&) = delete;
  KvSender& operator=(const KvSender&) = delete;

  // One Prefill call. `cancelled` is polled while the prompt computes.
  absl::StatusOr<baton::internal::v1::PrefillResponse> Run(
      const baton::internal::v1::PrefillRequest& request, const std::function<bool()>& cancelled);

 private:
  baton::internal::v1::KvTransfer::Stub* StubFor(const std::string& target);
  // The sink that pushes the prompt for `ticket` (checked): plain, sliced from this one
  // rank, or sliced from every rank of the group (begun on each; `wire` is the ticket as
  // it came).
  absl::StatusOr<std::shared_ptr<PushSink>> SinkFor(
      const transport::TransferTicket& ticket, const baton::internal::v1::TransferTicket& wire);
  void Release(baton::internal::v1::KvTransfer::Stub* stub, const std::string& transfer_id);
  // Extends the reservation's lease by `lease`; its new end.
  absl::StatusOr<absl::Time> KeepAlive(baton::internal::v1::KvTransfer::Stub* stub,
                                       const std::string& transfer_id, absl::Duration lease);

  engine::Engine* engine_;
  transport::UcxWorker* ucx_;
  KvSenderOptions options_;
  WorkerMetrics* metrics_;
  kvcache::PageLayout layout_;
  const transport::RegisteredRegion* region_;

  SenderGroup group_;
  RemotePools pools_;
  std::atomic<uint64_t> next_push_{1};

  std::mutex mu_;
  std::map<std::string, std::unique_ptr<baton::internal::v1::KvTransfer::Stub>> stubs_;
};

}  // namespace baton::worker
