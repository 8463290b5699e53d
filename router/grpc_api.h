// baton.v1.Baton over gRPC: Generate (server streaming), Tokenize, Detokenize,
// ListModels, ModelInfo. Requests are converted to the same OpenAiRequest the HTTP API
// parses, so both APIs share one validation and one path to the worker.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "baton/v1/baton.grpc.pb.h"
#include "router/openai_protocol.h"
#include "router/router_metrics.h"
#include "router/served_model.h"
#include "router/worker_client.h"
#include "service/cancel_watcher.h"

namespace baton::router {

struct GrpcApiContext {
  ServedModel* model = nullptr;
  WorkerClient* worker = nullptr;
  RouterMetrics* metrics = nullptr;
  service::CancelWatcher* watcher = nullptr;
  ProtocolLimits limits;
  std::string api_key;  // empty: no authentication
};

// Checks and converts a baton.v1 GenerateRequest; InvalidArgument naming the field.
absl::StatusOr<OpenAiRequest> FromProto(const baton::v1::GenerateRequest& in,
                                        const ProtocolLimits& limits);

std::unique_ptr<grpc::Service> MakeGrpcApi(GrpcApiContext context);

}  // namespace baton::router
