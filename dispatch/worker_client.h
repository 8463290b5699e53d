// The router's connection to one worker's internal gRPC API (baton.internal.v1.Worker and
// grpc.health.v1). The channel connects lazily and reconnects by itself; calls against a
// worker that is down fail fast with Unavailable and a message that says what to check.
//
//   WorkerClient worker("127.0.0.1:50061");
//   BATON_ASSIGN_OR_RETURN(auto info, worker.GetModelInfo(absl::Seconds(5)));
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "baton/internal/v1/worker.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "service/internal_auth.h"

namespace baton::dispatch {

class WorkerClient {
 public:
  // `auth`: what the router presents on every call (service/internal_auth.h).
  explicit WorkerClient(std::string target, std::shared_ptr<const service::InternalAuth> auth =
                                                service::InternalAuth::Open());

  const std::string& target() const { return target_; }
  baton::internal::v1::Worker::Stub* stub() { return stub_.get(); }
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }

  absl::StatusOr<baton::internal::v1::GetModelInfoResponse> GetModelInfo(absl::Duration timeout);
  absl::StatusOr<baton::internal::v1::GetStatsResponse> GetStats(absl::Duration timeout);
  // OK when the worker answers grpc.health.v1 Check with SERVING.
  absl::Status CheckHealth(absl::Duration timeout);

  // A worker's gRPC status as the router reports it: same code; UNAVAILABLE says which
  // worker and what to check.
  absl::Status ToStatus(const grpc::Status& status) const;

 private:
  std::string target_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<baton::internal::v1::Worker::Stub> stub_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_;
};

}  // namespace baton::dispatch
