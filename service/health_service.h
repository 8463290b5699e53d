// grpc.health.v1 for a gRPC server: Check and Watch, for "" (the whole server) and the
// services it names. gRPC's default health service is a callback service, and a callback
// service starts gRPC's own polling threads in the process ("nexting" threads). Those
// then take reads off the sockets of every call in the process and hand them to the
// threads that own the calls: in the router that was 2.7 more thread switches per token
// (dispatch/completion_loops.h, docs/perf/frontdoor.md). This one is a plain synchronous
// service: a probe's Check takes a sync-server thread for a moment, a Watch holds one
// until the client leaves or the server stops. The router and the workers serve it.
//
//   HealthService health({"", "baton.v1.Baton"});   // all SERVING
//   grpc::EnableDefaultHealthCheckService(false);
//   builder.RegisterService(&health);
//   ...
//   health.Shutdown();  // NOT_SERVING everywhere; open Watch calls end
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "grpc/health/v1/health.grpc.pb.h"

namespace baton::service {

class HealthService final : public grpc::health::v1::Health::Service {
 public:
  using Status = grpc::health::v1::HealthCheckResponse::ServingStatus;

  explicit HealthService(const std::vector<std::string>& serving);

  // Unknown names are added.
  void Set(const std::string& service, Status status);
  // Every service NOT_SERVING from now on; Watch calls send that and end.
  void Shutdown();

  grpc::Status Check(grpc::ServerContext* ctx, const grpc::health::v1::HealthCheckRequest* req,
                     grpc::health::v1::HealthCheckResponse* out) override;
  grpc::Status Watch(grpc::ServerContext* ctx, const grpc::health::v1::HealthCheckRequest* req,
                     grpc::ServerWriter<grpc::health::v1::HealthCheckResponse>* writer) override;

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, Status> status_;  // guarded by mu_
  bool shut_down_ = false;                // guarded by mu_
};

}  // namespace baton::service
