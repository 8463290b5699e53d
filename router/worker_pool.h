// The workers one router serves from, and where each request runs (docs/disaggregation.md):
// on a colocated worker, or split between a prefill worker (which computes the prompt and
// writes its K/V into the decode worker's pages) and a decode worker (which streams the
// tokens). Colocated and split workers can be mixed: requests rotate over the colocated
// workers and the decode workers; a request that lands on a decode worker takes the next
// prefill worker, or prefills on the decode worker when there are none.
//
// Round-robin is the placement policy for now; the cache-aware router replaces Pick.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "router/router_metrics.h"
#include "router/worker_client.h"

namespace baton::router {

// What the router does when a Prefill call fails for a reason another worker might not
// have (the prefill worker died, the transfer broke).
enum class PrefillFailover {
  kRetry,  // once on another prefill worker, then on the decode worker itself
  kLocal,  // on the decode worker itself
  kNone,   // the request fails
};

// "retry", "local" or "none"; InvalidArgument naming the flag otherwise.
absl::StatusOr<PrefillFailover> ParsePrefillFailover(std::string_view name);

class WorkerPool;

// Where one request runs.
struct Route {
  Route() = default;
  Route(WorkerClient* worker) : decode(worker) {}  // NOLINT: a colocated route
  // Streams the tokens; computes the prompt too when `prefill` is null.
  WorkerClient* decode = nullptr;
  WorkerClient* prefill = nullptr;
  const WorkerPool* pool = nullptr;  // for failover; null: no retry on another worker
};

class WorkerPool {
 public:
  // Comma-separated host:port lists; at least one colocated or decode worker. `metrics`
  // (may be null) must outlive the pool.
  static absl::StatusOr<std::unique_ptr<WorkerPool>> Create(std::string_view colocated,
                                                            std::string_view prefill,
                                                            std::string_view decode,
                                                            PrefillFailover failover,
                                                            RouterMetrics* metrics = nullptr);

  Route Pick();
  // A prefill worker other than `failed`, or null when there is none.
  WorkerClient* OtherPrefill(const WorkerClient* failed) const;
  PrefillFailover failover() const { return failover_; }
  // A worker that can answer for the model (GetModelInfo, readiness): the first colocated
  // or decode worker.
  WorkerClient* primary() const { return serving_.front(); }
  bool disaggregated() const { return !prefill_.empty(); }
  RouterMetrics* metrics() const { return metrics_; }
  const std::vector<std::unique_ptr<WorkerClient>>& all() const { return all_; }

 private:
  WorkerPool() = default;

  std::vector<std::unique_ptr<WorkerClient>> all_;
  std::vector<WorkerClient*> serving_;  // colocated, then decode workers
  std::vector<bool> is_decode_;         // parallel to serving_
  std::vector<WorkerClient*> prefill_;
  PrefillFailover failover_ = PrefillFailover::kRetry;
  RouterMetrics* metrics_ = nullptr;
  std::atomic<uint64_t> next_serving_{0};
  std::atomic<uint64_t> next_prefill_{0};
};

}  // namespace baton::router
