// The gRPC face of one engine: baton.internal.v1.Worker (Generate, Prefill, GetStats,
// GetModelInfo) and baton.internal.v1.KvEvents (Subscribe, GetSnapshot).
//
//   WorkerService service(engine.get());   // colocated, without KV transfers
//   grpc::ServerBuilder builder;
//   builder.RegisterService(service.worker());
//   builder.RegisterService(service.kv_events());
//
// Generate maps engine errors to gRPC codes (INVALID_ARGUMENT, RESOURCE_EXHAUSTED for a
// full queue, ALREADY_EXISTS, CANCELLED), and cancels the request in the engine as soon
// as the call is cancelled, its deadline passes or the client goes away.
//
// Roles: a worker with a KvReceiver accepts Generate calls that name a completed KV
// transfer (decode role); one with a KvSender serves Prefill (prefill role). A colocated
// worker may have both.
#pragma once

#include <memory>

#include "absl/status/status.h"
#include "baton/internal/v1/kv_events.grpc.pb.h"
#include "baton/internal/v1/worker.grpc.pb.h"
#include "engine/engine.h"
#include "grpcpp/grpcpp.h"
#include "service/internal_auth.h"
#include "worker/kv_receiver.h"
#include "worker/kv_sender.h"

namespace baton::worker {

// Checks and converts what a peer sent; InvalidArgument naming the field.
absl::StatusOr<engine::EngineRequest> FromProto(const baton::internal::v1::GenerateRequest& in);

class WorkerService {
 public:
  // Everything must outlive the service; `receiver` and `sender` may be null. `role` is
  // what GetModelInfo reports: "colocated", "prefill" or "decode". Every call must pass
  // `auth`'s check first.
  explicit WorkerService(
      engine::Engine* engine, KvReceiver* receiver = nullptr, KvSender* sender = nullptr,
      std::string role = "colocated",
      std::shared_ptr<const service::InternalAuth> auth = service::InternalAuth::Open());
  ~WorkerService();
  WorkerService(const WorkerService&) = delete;
  WorkerService& operator=(const WorkerService&) = delete;

  grpc::Service* worker();
  grpc::Service* kv_events();

  // The drain (worker/worker_drain.h): from BeginDrain, new Generate and Prefill calls
  // are UNAVAILABLE; live_calls() is how many are still being served; ExpireDrain
  // cancels those left, which then end UNAVAILABLE saying why.
  void BeginDrain();
  int64_t live_calls() const;
  void ExpireDrain();

 private:
  class WorkerImpl;
  class KvEventsImpl;
  std::unique_ptr<WorkerImpl> worker_;
  std::unique_ptr<KvEventsImpl> kv_events_;
};

}  // namespace baton::worker
