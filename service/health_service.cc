#include "service/health_service.h"

#include <chrono>

#include "common/strings.h"

namespace baton::service {

namespace hpb = ::grpc::health::v1;

HealthService::HealthService(const std::vector<std::string>& serving) {
  for (const std::string& s : serving) status_[s] = hpb::HealthCheckResponse::SERVING;
}

void HealthService::Set(const std::string& service, Status status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) return;
    status_[service] = status;
  }
  changed_.notify_all();
}

void HealthService::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    shut_down_ = true;
    for (auto& [name, status] : status_) status = hpb::HealthCheckResponse::NOT_SERVING;
  }
  changed_.notify_all();
}

grpc::Status HealthService::Check(grpc::ServerContext* /*ctx*/, const hpb::HealthCheckRequest* req,
                                  hpb::HealthCheckResponse* out) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = status_.find(req->service());
  if (it == status_.end()) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        StrCat("no health status for service '", req->service(), "'"));
  }
  out->set_status(it->second);
  return grpc::Status::OK;
}

grpc::Status HealthService::Watch(grpc::ServerContext* ctx, const hpb::HealthCheckRequest* req,
                                  grpc::ServerWriter<hpb::HealthCheckResponse>* writer) {
  std::unique_lock<std::mutex> lock(mu_);
  bool first = true;
  Status sent = hpb::HealthCheckResponse::UNKNOWN;
  for (;;) {
    auto it = status_.find(req->service());
    const Status now = it == status_.end() ? hpb::HealthCheckResponse::SERVICE_UNKNOWN : it->second;
    if (first || now != sent) {
      hpb::HealthCheckResponse out;
      out.set_status(now);
      lock.unlock();
      if (!writer->Write(out)) return grpc::Status(grpc::StatusCode::CANCELLED, "client left");
      lock.lock();
      first = false;
      sent = now;
      continue;  // it may have changed while the lock was released
    }
    if (shut_down_) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the router is shutting down");
    }
    // A client that leaves wakes no one; look for it now and then.
    changed_.wait_for(lock, std::chrono::milliseconds(200));
    if (ctx->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "client left");
  }
}

}  // namespace baton::service
