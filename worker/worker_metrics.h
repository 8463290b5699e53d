// A worker's Prometheus metrics (GET /metrics on --metrics-port): the engine's state,
// sampled at each scrape, and the KV-transfer path of both roles, so that a dashboard can
// show the P/D path. Names follow Prometheus conventions: baton_ prefix, base units,
// _total for counters.
#pragma once

#include <memory>
#include <string>

#include "engine/engine.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace baton::worker {

class WorkerMetrics {
 public:
  WorkerMetrics();

  // The text exposition, after refreshing the engine gauges from `engine` (may be null).
  std::string Render(const engine::Engine* engine);

  // Sender side: one transfer that completed.
  void ObserveSent(uint64_t bytes, double transfer_seconds, double exposed_seconds);
  // Receiver side: one transfer whose completion was verified.
  void ObserveReceived(uint64_t bytes);
  // A transfer that failed; `side` is "sender" or "receiver", `reason` a short word
  // ("reserve", "push", "complete", "checksum", "cancelled", ...).
  void CountFailed(const std::string& side, const std::string& reason);
  void CountExpired() { expired_.Increment(); }
  void SetLeases(int64_t held, int64_t pages) {
    leases_held_.Set(static_cast<double>(held));
    pages_reserved_.Set(static_cast<double>(pages));
  }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Histogram>& bytes_;
  prometheus::Family<prometheus::Histogram>& seconds_;
  prometheus::Histogram& exposed_;
  prometheus::Family<prometheus::Counter>& failed_;
  prometheus::Counter& expired_;
  prometheus::Gauge& leases_held_;
  prometheus::Gauge& pages_reserved_;
  prometheus::Family<prometheus::Gauge>& engine_;
};

}  // namespace baton::worker
