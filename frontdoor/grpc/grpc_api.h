// baton.v1.Baton over gRPC: Generate (server streaming), Tokenize, Detokenize,
// ListModels, ModelInfo. Requests are converted to the same OpenAiRequest the HTTP API
// parses, so both APIs share one validation and one path to the worker.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "baton/v1/baton.grpc.pb.h"
#include "dispatch/completion_loops.h"
#include "dispatch/router_metrics.h"
#include "dispatch/worker_client.h"
#include "dispatch/worker_pool.h"
#include "frontdoor/grpc/unary_call.h"
#include "frontdoor/openai/openai_protocol.h"
#include "frontdoor/openai/request_log.h"
#include "frontdoor/openai/served_model.h"
#include "grpcpp/server_builder.h"
#include "service/api_key.h"
#include "service/byte_budget.h"
#include "service/drain_state.h"

namespace baton::frontdoor {

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
  // The router's drain: from its start, new Generate calls are UNAVAILABLE. Null: none.
  const service::DrainState* drain = nullptr;
};

// Checks and converts a baton.v1 GenerateRequest; InvalidArgument naming the field.
absl::StatusOr<OpenAiRequest> FromProto(const baton::v1::GenerateRequest& in,
                                        const ProtocolLimits& limits);

// The tenant of the key in the call's 'authorization' metadata (the anonymous one when no
// key is configured); Unauthenticated when none matches.
absl::StatusOr<const service::Tenant*> CheckApiKey(const grpc::ServerContextBase& ctx,
                                                   const service::ApiKeys& keys);

// A call's share of --max-inflight-body-bytes (context.bodies), held until it has answered;
// nothing when there is no bound. ResourceExhausted naming the flag when it does not fit.
absl::StatusOr<std::optional<service::ByteBudget::Lease>> HoldRequestBytes(
    const GrpcApiContext& context, size_t bytes);

// The service and the threads that run Generate, Tokenize and Detokenize.
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
  // Generate, Tokenize and Detokenize run on `loops`' server queues, which must outlive
  // Stop().
  void Start(dispatch::CompletionLoops* loops);
  // After the server's Shutdown (which cancels every call): waits until no call on the
  // loops is left, so that they may shut down.
  void Stop();

 private:
  class Service;
  GrpcApiContext context_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<ApiLoopState> state_;
  std::vector<UnaryMethod> unary_;  // Tokenize, Detokenize
  bool started_ = false;
};

}  // namespace baton::frontdoor
