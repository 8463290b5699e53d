#include "dispatch/worker_client.h"

#include <chrono>
#include <utility>

#include "common/strings.h"
#include "service/grpc_status.h"

namespace baton::dispatch {
namespace {

namespace pb = ::baton::internal::v1;

std::chrono::system_clock::time_point DeadlineIn(absl::Duration timeout) {
  return std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout);
}

}  // namespace

WorkerClient::WorkerClient(std::string target, std::shared_ptr<const service::InternalAuth> auth)
    : target_(std::move(target)) {
  channel_ = auth->Channel(target_);
  stub_ = pb::Worker::NewStub(channel_);
  health_ = grpc::health::v1::Health::NewStub(channel_);
}

absl::Status WorkerClient::ToStatus(const grpc::Status& status) const {
  if (status.ok()) return absl::OkStatus();
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    return absl::UnavailableError(StrCat("the worker at ", target_, " is unavailable (",
                                         status.error_message(),
                                         "); check that `baton worker` is running there"));
  }
  if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
    return absl::UnauthenticatedError(StrCat(
        "the worker at ", target_, " refused the router's credential (", status.error_message(),
        "); give the router the same --internal-token-file "
        "(or --tls-* files) as the workers"));
  }
  return service::FromGrpcStatus(status);
}

absl::StatusOr<pb::GetModelInfoResponse> WorkerClient::GetModelInfo(absl::Duration timeout) {
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineIn(timeout));
  pb::GetModelInfoResponse out;
  grpc::Status status = stub_->GetModelInfo(&ctx, pb::GetModelInfoRequest(), &out);
  if (!status.ok()) return ToStatus(status);
  return out;
}

absl::StatusOr<pb::GetStatsResponse> WorkerClient::GetStats(absl::Duration timeout) {
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineIn(timeout));
  pb::GetStatsResponse out;
  grpc::Status status = stub_->GetStats(&ctx, pb::GetStatsRequest(), &out);
  if (!status.ok()) return ToStatus(status);
  return out;
}

absl::Status WorkerClient::CheckHealth(absl::Duration timeout) {
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineIn(timeout));
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status status = health_->Check(&ctx, request, &response);
  if (!status.ok()) return ToStatus(status);
  if (response.status() != grpc::health::v1::HealthCheckResponse::SERVING) {
    return absl::UnavailableError(StrCat("the worker at ", target_, " is not serving"));
  }
  return absl::OkStatus();
}

}  // namespace baton::dispatch
