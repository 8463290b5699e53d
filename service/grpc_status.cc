#include "service/grpc_status.h"

#include <string>

#include "common/strings.h"

namespace baton::service {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status, std::string_view context) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(
      static_cast<absl::StatusCode>(status.error_code()),
      context.empty() ? status.error_message() : StrCat(context, ": ", status.error_message()));
}

}  // namespace baton::service
