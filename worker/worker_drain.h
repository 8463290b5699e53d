// A worker's drain (SIGTERM), as its calls see it: from the start, new Generate and
// Prefill calls are UNAVAILABLE, which the router takes as "place it elsewhere"; once
// --shutdown-grace-seconds have passed, the calls left are cancelled in the engine and
// end UNAVAILABLE too, so that the router continues their streams on another worker
// (RequestRun::Migrate) or ends them with an error event, never silently.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "grpcpp/grpcpp.h"
#include "service/drain_state.h"

namespace baton::worker {

class LiveCalls {
 public:
  void AddGenerate(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    generate_.insert(id);
  }
  void RemoveGenerate(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    generate_.erase(id);
  }
  std::vector<std::string> GenerateIds() const {
    std::lock_guard<std::mutex> lock(mu_);
    return {generate_.begin(), generate_.end()};
  }
  void AddPrefill() {
    std::lock_guard<std::mutex> lock(mu_);
    ++prefills_;
  }
  void RemovePrefill() {
    std::lock_guard<std::mutex> lock(mu_);
    --prefills_;
  }
  int64_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int64_t>(generate_.size()) + prefills_;
  }

 private:
  // std::mutex rather than absl::Mutex: Debian's Abseil is not built for TSan.
  mutable std::mutex mu_;
  absl::flat_hash_set<std::string> generate_;
  int64_t prefills_ = 0;
};

struct WorkerDrain {
  service::DrainState state;
  LiveCalls live;

  static grpc::Status Refusal() {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "the worker is shutting down (draining after SIGTERM); place the request "
                        "on another worker");
  }
  // A call's end, with the reason when the drain's cancellation caused it.
  absl::Status Explain(const absl::Status& status) const {
    if (!absl::IsCancelled(status) || !state.expired()) return status;
    return absl::UnavailableError(
        "the worker shut down before the request finished: it ran past "
        "--shutdown-grace-seconds");
  }
};

}  // namespace baton::worker
