// baton.v1.Baton over gRPC: Generate (server streaming), Tokenize, Detokenize,
// ListModels, ModelInfo. Requests are converted to the same OpenAiRequest the HTTP API
// parses, so both APIs share one validation and one path to the worker.
#pragma once

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "baton/v1/baton.grpc.pb.h"
#include "dispatch/completion_loops.h"
#include "dispatch/router_metrics.h"
#include "dispatch/worker_client.h"
#include "dispatch/worker_pool.h"
#include "frontdoor/openai/openai_protocol.h"
#include "frontdoor/openai/request_log.h"
#include "frontdoor/openai/served_model.h"
#include "grpcpp/server_builder.h"
#include "service/api_key.h"
#include "service/byte_budget.h"

namespace baton::frontdoor {

struct GenerateLoopState;

struct GrpcApiContext {
  ServedModel* model = nullptr;
  dispatch::WorkerPool* pool = nullptr;
  dispatch::RouterMetrics* metrics = nullptr;
  ProtocolLimits limits;
  // Without keys no authentication; else 'authorization: Bearer <key>' metadata.
  std::shared_ptr<const service::ApiKeys> api_keys = std::make_shared<service::ApiKeys>();
  RequestLog* request_log = nullptr;  // null: no per-request lines
  // Bounds the request bytes all calls hold at once, with the HTTP server's bodies
  // (--max-inflight-body-bytes); null: no bound.
  std::shared_ptr<service::ByteBudget> bodies;
};

// Checks and converts a baton.v1 GenerateRequest; InvalidArgument naming the field.
absl::StatusOr<OpenAiRequest> FromProto(const baton::v1::GenerateRequest& in,
                                        const ProtocolLimits& limits);

// The tenant of the key in the call's 'authorization' metadata (the anonymous one when no
// key is configured); Unauthenticated when none matches.
absl::StatusOr<const service::Tenant*> CheckApiKey(const grpc::ServerContextBase& ctx,
                                                   const service::ApiKeys& keys);

// The service and the threads that run Generate.
//
//   GrpcApi api(context);
//   api.Register(builder);          // before BuildAndStart
//   server = builder.BuildAndStart();
//   api.Start();
//   ...
//   server->Shutdown(deadline);
//   api.Stop();                     // after the server's Shutdown
class GrpcApi {
 public:
  GrpcApi(GrpcApiContext context);
  ~GrpcApi();
  GrpcApi(const GrpcApi&) = delete;
  GrpcApi& operator=(const GrpcApi&) = delete;

  void Register(grpc::ServerBuilder& builder);
  // Generate runs on `loops`' server queues, which must outlive Stop().
  void Start(dispatch::CompletionLoops* loops);
  // After the server's Shutdown (which cancels every call): waits until no Generate call
  // is left, so that the loops may shut down.
  void Stop();

 private:
  class Service;
  GrpcApiContext context_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<GenerateLoopState> state_;
  bool started_ = false;
};

}  // namespace baton::frontdoor
