// The router's Prometheus metrics (served on GET /metrics): the latencies a client sees
// (time to first token, between tokens, per output token, end to end: vLLM's, with a
// model_name label), and the router's own (requests, routing, KV index, transfers). Names
// follow Prometheus conventions: baton_ prefix, base units, _total for counters.
// docs/operations.md lists them all.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "service/histogram_buckets.h"

namespace baton::dispatch {

class RouterMetrics {
 public:
  RouterMetrics();

  // Creates the latency series of the served model (label model_name) with `buckets`'
  // overrides. Call once, before requests arrive; until then latencies are not recorded.
  void SetModel(const std::string& model_name, const service::HistogramBuckets& buckets);

  prometheus::Registry& registry() { return *registry_; }

  // One finished request: `api` is "http" or "grpc", `endpoint` e.g. "/v1/chat/completions"
  // or "Generate", `code` the HTTP status or gRPC code name.
  void CountRequest(const std::string& api, const std::string& endpoint, const std::string& code);
  void ObserveRequestSeconds(const std::string& endpoint, double seconds);
  void ObserveTimeToFirstToken(double seconds) {
    if (ttft_ != nullptr) ttft_->Observe(seconds);
  }
  void ObserveInterTokenSeconds(double seconds) {
    if (itl_ != nullptr) itl_->Observe(seconds);
  }
  // One request that finished well: its tokens (a request with several choices counts
  // their completion tokens together), arrival to last token (`e2e_seconds`), and the
  // first token's time, from which the time per output token follows (vLLM's:
  // (e2e - ttft) / (completion - 1), for completions of two tokens or more).
  void ObserveFinished(int64_t prompt, int64_t cached, int64_t completion, double e2e_seconds,
                       double ttft_seconds);
  void CountClientCancel() { client_cancels_.Increment(); }
  // Split requests: one Prefill call's outcome ("ok", or what followed a failure:
  // "retry", "local", "failed"), and where an ok one's time went, as the prefill worker
  // measured it (phase "queue", "compute", "transfer", "exposed_transfer").
  void CountPrefill(const std::string& outcome);
  void ObservePrefillPhase(const std::string& phase, double seconds);

  prometheus::Gauge& running() { return running_; }

  // Routing (docs/routing.md): each placement by policy and worker (the serving worker;
  // a split request also counts its prefill worker), and the prompt tokens the policy
  // expected to find cached (the tokens that did are baton_router_cached_prompt_tokens_total).
  void CountDecision(std::string_view policy, const std::string& worker);
  void AddExpectedHitTokens(int64_t tokens) {
    expected_hits_.Increment(static_cast<double>(tokens));
  }
  void SetIndex(int64_t blocks, int64_t entries, int64_t bytes);
  void SetWorkerHealthy(const std::string& worker, bool healthy);
  // KV event streams, per worker.
  void CountKvEventGap(const std::string& worker);
  void CountKvSnapshot(const std::string& worker);
  void CountKvEventReconnect(const std::string& worker);
  void CountKvEventError(const std::string& worker);
  void ObserveKvEventLag(double seconds) { kv_event_lag_.Observe(seconds); }
  // A request started again on another worker: its own could not be reached before it
  // sent anything.
  void CountReroute() { reroutes_.Increment(); }
  // A stream continued on another worker after its own became unreachable mid-stream.
  void CountMigration() { migrations_.Increment(); }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& request_seconds_;
  prometheus::Family<prometheus::Histogram>& ttft_family_;
  prometheus::Family<prometheus::Histogram>& itl_family_;
  prometheus::Family<prometheus::Histogram>& tpot_family_;
  prometheus::Family<prometheus::Histogram>& e2e_family_;
  // SetModel's series; null before.
  prometheus::Histogram* ttft_ = nullptr;
  prometheus::Histogram* itl_ = nullptr;
  prometheus::Histogram* tpot_ = nullptr;
  prometheus::Histogram* e2e_ = nullptr;
  prometheus::Counter& prompt_tokens_;
  prometheus::Counter& cached_tokens_;
  prometheus::Counter& completion_tokens_;
  prometheus::Counter& client_cancels_;
  prometheus::Gauge& running_;
  prometheus::Family<prometheus::Counter>& prefills_;
  prometheus::Family<prometheus::Histogram>& prefill_seconds_;
  prometheus::Family<prometheus::Counter>& decisions_;
  prometheus::Counter& expected_hits_;
  prometheus::Gauge& index_blocks_;
  prometheus::Gauge& index_entries_;
  prometheus::Gauge& index_bytes_;
  prometheus::Family<prometheus::Gauge>& worker_healthy_;
  prometheus::Family<prometheus::Counter>& kv_event_gaps_;
  prometheus::Family<prometheus::Counter>& kv_snapshots_;
  prometheus::Family<prometheus::Counter>& kv_event_reconnects_;
  prometheus::Family<prometheus::Counter>& kv_event_errors_;
  prometheus::Histogram& kv_event_lag_;
  prometheus::Counter& reroutes_;
  prometheus::Counter& migrations_;
};

}  // namespace baton::dispatch
