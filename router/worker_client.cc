#include "router/worker_client.h"

#include <chrono>
#include <utility>

#include "common/strings.h"

namespace baton::router {
namespace {

namespace pb = ::baton::internal::v1;

std::chrono::system_clock::time_point DeadlineIn(absl::Duration timeout) {
  return std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout);
}

}  // namespace

WorkerClient::WorkerClient(std::string target) : target_(std::move(target)) {
  grpc::ChannelArguments args;
  // Token streams are long-lived; keepalive notices a worker that vanished without a FIN.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // Reconnect quickly after a worker restart instead of gRPC's default backoff of up to 2 min.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  channel_ = grpc::CreateCustomChannel(target_, grpc::InsecureChannelCredentials(), args);
  stub_ = pb::Worker::NewStub(channel_);
  health_ = grpc::health::v1::Health::NewStub(channel_);
}

absl::Status WorkerClient::ToStatus(const grpc::Status& status) const {
  if (status.ok()) return absl::OkStatus();
  const auto code = static_cast<absl::StatusCode>(status.error_code());
  if (code == absl::StatusCode::kUnavailable) {
    return absl::UnavailableError(StrCat("the worker at ", target_, " is unavailable (",
                                         status.error_message(),
                                         "); check that `baton worker` is running there"));
  }
  return absl::Status(code, status.error_message());
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

}  // namespace baton::router
