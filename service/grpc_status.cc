#include "service/grpc_status.h"

#include <string>

#include "common/param_error.h"
#include "common/strings.h"
#include "google/rpc/status.pb.h"

namespace baton::service {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  const auto code = static_cast<grpc::StatusCode>(status.code());
  std::string message(status.message());
  const std::string param = ParamOf(status);
  if (param.empty()) return grpc::Status(code, message);
  // The field travels as gRPC's rich error model, which the router reads back (below) and
  // any other client's status-details helpers read as a BadRequest.
  google::rpc::Status details;
  details.set_code(static_cast<int32_t>(code));
  details.set_message(message);
  google::rpc::BadRequest bad;
  auto* violation = bad.add_field_violations();
  violation->set_field(param);
  violation->set_description(message);
  details.add_details()->PackFrom(bad);
  return grpc::Status(code, message, details.SerializeAsString());
}

absl::Status FromGrpcStatus(const grpc::Status& status, std::string_view context) {
  if (status.ok()) return absl::OkStatus();
  absl::Status out(
      static_cast<absl::StatusCode>(status.error_code()),
      context.empty() ? status.error_message() : StrCat(context, ": ", status.error_message()));
  google::rpc::Status details;
  if (status.error_details().empty() || !details.ParseFromString(status.error_details())) {
    return out;
  }
  for (const auto& any : details.details()) {
    google::rpc::BadRequest bad;
    if (any.UnpackTo(&bad) && bad.field_violations_size() > 0) {
      return WithParam(std::move(out), bad.field_violations(0).field());
    }
  }
  return out;
}

}  // namespace baton::service
