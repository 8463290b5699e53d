// absl::Status to grpc::Status and back, written once for every gRPC service and client:
// the codes are the same numbers (both follow google.rpc.Code). The parameter an error
// names (common/param_error.h) travels as a google.rpc.BadRequest in the status details,
// so that an error the worker found still names its field at the front door.
#pragma once

#include <string_view>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace baton::service {

grpc::Status ToGrpcStatus(const absl::Status& status);

// `context`, when not empty, goes before the message: "Reserve at 10.0.0.2:5001: ...".
absl::Status FromGrpcStatus(const grpc::Status& status, std::string_view context = {});

}  // namespace baton::service
