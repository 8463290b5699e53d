// A worker's Prometheus metrics (GET /metrics on --metrics-port): the engine's, the set a
// vLLM operator expects (requests running and waiting, KV cache usage, prefix cache and
// preemption counts, tokens per step, per-request times and token counts, finished
// requests by reason) with a model_name label, and the KV-transfer path of both roles, so
// that a dashboard can show the P/D path. Names follow Prometheus conventions: baton_
// prefix, base units, _total for counters. docs/operations.md lists them all.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "engine/engine.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "service/histogram_buckets.h"

namespace baton::worker {

class WorkerMetrics {
 public:
  WorkerMetrics();
  ~WorkerMetrics();

  // Creates the engine's series, labelled model_name=`model_name`, with `buckets`'
  // overrides; token-count histograms reach `max_model_len`. Call once, before the engine
  // starts (the hooks below need these series).
  void SetModel(const std::string& model_name, const service::HistogramBuckets& buckets,
                int64_t max_model_len);
  // For EngineOptions::on_step and on_request_end (engine thread; after SetModel).
  void ObserveStep(int64_t tokens);
  void ObserveRequestEnd(const engine::TokenEvent& last);

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
  // The series of one model (the engine's), created by SetModel.
  struct EngineSeries;

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Histogram>& bytes_;
  prometheus::Family<prometheus::Histogram>& seconds_;
  prometheus::Histogram& exposed_;
  prometheus::Family<prometheus::Counter>& failed_;
  prometheus::Counter& expired_;
  prometheus::Gauge& leases_held_;
  prometheus::Gauge& pages_reserved_;
  std::unique_ptr<EngineSeries> engine_;
  // Render's: the engine's cumulative counts at the last scrape, so that counters advance
  // by the difference.
  std::mutex render_mu_;
  int64_t last_queried_ = 0;
  int64_t last_hit_ = 0;
  int64_t last_preemptions_ = 0;
};

}  // namespace baton::worker
