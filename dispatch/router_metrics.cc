#include "dispatch/router_metrics.h"

#include "service/metrics.h"

namespace baton::dispatch {
namespace {

// Token gaps are short: 0.5 ms to 2.5 s.
prometheus::Histogram::BucketBoundaries TokenGapBuckets() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5};
}

}  // namespace

RouterMetrics::RouterMetrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      requests_(prometheus::BuildCounter()
                    .Name("baton_router_requests_total")
                    .Help("Requests the router answered, by API, endpoint and status code")
                    .Register(*registry_)),
      request_seconds_(prometheus::BuildHistogram()
                           .Name("baton_router_request_duration_seconds")
                           .Help("Arrival to last byte of a request, by endpoint")
                           .Register(*registry_)),
      ttft_family_(prometheus::BuildHistogram()
                       .Name("baton_router_time_to_first_token_seconds")
                       .Help("Arrival at the router to the first token's delta")
                       .Register(*registry_)),
      itl_family_(prometheus::BuildHistogram()
                      .Name("baton_router_inter_token_latency_seconds")
                      .Help("Gap between successive token deltas of one sequence")
                      .Register(*registry_)),
      tpot_family_(prometheus::BuildHistogram()
                       .Name("baton_router_time_per_output_token_seconds")
                       .Help("First token to last, over the output tokens after the first, "
                             "per finished request of two tokens or more")
                       .Register(*registry_)),
      e2e_family_(prometheus::BuildHistogram()
                      .Name("baton_router_e2e_request_latency_seconds")
                      .Help("Arrival at the router to the last token, per finished request")
                      .Register(*registry_)),
      prompt_tokens_(prometheus::BuildCounter()
                         .Name("baton_router_prompt_tokens_total")
                         .Help("Prompt tokens of finished requests")
                         .Register(*registry_)
                         .Add({})),
      cached_tokens_(prometheus::BuildCounter()
                         .Name("baton_router_cached_prompt_tokens_total")
                         .Help("Prompt tokens served from the workers' prefix caches")
                         .Register(*registry_)
                         .Add({})),
      completion_tokens_(prometheus::BuildCounter()
                             .Name("baton_router_generation_tokens_total")
                             .Help("Tokens generated for finished requests")
                             .Register(*registry_)
                             .Add({})),
      client_cancels_(prometheus::BuildCounter()
                          .Name("baton_router_client_cancellations_total")
                          .Help("Requests stopped because the client disconnected or cancelled")
                          .Register(*registry_)
                          .Add({})),
      running_(prometheus::BuildGauge()
                   .Name("baton_router_requests_running")
                   .Help("Generation requests in flight")
                   .Register(*registry_)
                   .Add({})),
      prefills_(prometheus::BuildCounter()
                    .Name("baton_router_prefills_total")
                    .Help("Prefill calls of split requests, by outcome (ok, or after a "
                          "failure: retry, local, failed)")
                    .Register(*registry_)),
      prefill_seconds_(prometheus::BuildHistogram()
                           .Name("baton_router_prefill_phase_seconds")
                           .Help("Split requests' prefill time by phase, as the prefill worker "
                                 "measured it (queue, compute, transfer, exposed_transfer)")
                           .Register(*registry_)),
      decisions_(
          prometheus::BuildCounter()
              .Name("baton_router_routing_decisions_total")
              .Help("Placements by policy and worker (a split request counts both of its workers)")
              .Register(*registry_)),
      expected_hits_(prometheus::BuildCounter()
                         .Name("baton_router_expected_cached_prompt_tokens_total")
                         .Help("Prompt tokens the routing policy expected the chosen worker to "
                               "find cached (compare baton_router_cached_prompt_tokens_total)")
                         .Register(*registry_)
                         .Add({})),
      index_blocks_(prometheus::BuildGauge()
                        .Name("baton_router_kv_index_blocks")
                        .Help("Distinct KV blocks in the router's index")
                        .Register(*registry_)
                        .Add({})),
      index_entries_(prometheus::BuildGauge()
                         .Name("baton_router_kv_index_entries")
                         .Help("(worker, block) entries in the router's KV index")
                         .Register(*registry_)
                         .Add({})),
      index_bytes_(prometheus::BuildGauge()
                       .Name("baton_router_kv_index_bytes")
                       .Help("The router's KV index's estimated memory")
                       .Register(*registry_)
                       .Add({})),
      worker_healthy_(prometheus::BuildGauge()
                          .Name("baton_router_worker_healthy")
                          .Help("1 while the worker passes its health check, else 0")
                          .Register(*registry_)),
      kv_event_gaps_(prometheus::BuildCounter()
                         .Name("baton_router_kv_event_gaps_total")
                         .Help("KV event batches out of sequence (a gap or a new epoch), by worker")
                         .Register(*registry_)),
      kv_snapshots_(prometheus::BuildCounter()
                        .Name("baton_router_kv_snapshots_total")
                        .Help("KV snapshots applied to the index, by worker")
                        .Register(*registry_)),
      kv_event_reconnects_(prometheus::BuildCounter()
                               .Name("baton_router_kv_event_reconnects_total")
                               .Help("KV event streams that ended and were opened again")
                               .Register(*registry_)),
      kv_event_errors_(prometheus::BuildCounter()
                           .Name("baton_router_kv_event_errors_total")
                           .Help("KV event batches or snapshots refused as malformed")
                           .Register(*registry_)),
      kv_event_lag_(prometheus::BuildHistogram()
                        .Name("baton_router_kv_event_lag_seconds")
                        .Help("Worker publish to router receipt of a KV event batch (the two "
                              "wall clocks)")
                        .Register(*registry_)
                        .Add({}, TokenGapBuckets())),
      reroutes_(prometheus::BuildCounter()
                    .Name("baton_router_reroutes_total")
                    .Help("Requests started again on another worker after theirs could not be "
                          "reached before it sent anything")
                    .Register(*registry_)
                    .Add({})),
      migrations_(prometheus::BuildCounter()
                      .Name("baton_router_migrations_total")
                      .Help("Streams continued on another worker after theirs became "
                            "unreachable mid-stream (--migration-limit)")
                      .Register(*registry_)
                      .Add({})) {}

void RouterMetrics::CountDecision(std::string_view policy, const std::string& worker) {
  decisions_.Add({{"policy", std::string(policy)}, {"worker", worker}}).Increment();
}

void RouterMetrics::SetModel(const std::string& model_name,
                             const service::HistogramBuckets& buckets) {
  const prometheus::Labels labels = {{"model_name", model_name}};
  ttft_ = &ttft_family_.Add(labels, buckets.For("router_time_to_first_token_seconds",
                                                service::TimeToFirstTokenBuckets()));
  itl_ = &itl_family_.Add(
      labels, buckets.For("router_inter_token_latency_seconds", service::TokenLatencyBuckets()));
  tpot_ = &tpot_family_.Add(
      labels, buckets.For("router_time_per_output_token_seconds", service::TokenLatencyBuckets()));
  e2e_ = &e2e_family_.Add(
      labels, buckets.For("router_e2e_request_latency_seconds", service::RequestLatencyBuckets()));
}

void RouterMetrics::ObserveFinished(int64_t prompt, int64_t cached, int64_t completion,
                                    double e2e_seconds, double ttft_seconds) {
  prompt_tokens_.Increment(static_cast<double>(prompt));
  cached_tokens_.Increment(static_cast<double>(cached));
  completion_tokens_.Increment(static_cast<double>(completion));
  if (e2e_ == nullptr) return;
  e2e_->Observe(e2e_seconds);
  if (completion > 1) {
    tpot_->Observe((e2e_seconds - ttft_seconds) / static_cast<double>(completion - 1));
  }
}

void RouterMetrics::SetIndex(int64_t blocks, int64_t entries, int64_t bytes) {
  index_blocks_.Set(static_cast<double>(blocks));
  index_entries_.Set(static_cast<double>(entries));
  index_bytes_.Set(static_cast<double>(bytes));
}

void RouterMetrics::SetWorkerHealthy(const std::string& worker, bool healthy) {
  worker_healthy_.Add({{"worker", worker}}).Set(healthy ? 1 : 0);
}

void RouterMetrics::CountKvEventGap(const std::string& worker) {
  kv_event_gaps_.Add({{"worker", worker}}).Increment();
}
void RouterMetrics::CountKvSnapshot(const std::string& worker) {
  kv_snapshots_.Add({{"worker", worker}}).Increment();
}
void RouterMetrics::CountKvEventReconnect(const std::string& worker) {
  kv_event_reconnects_.Add({{"worker", worker}}).Increment();
}
void RouterMetrics::CountKvEventError(const std::string& worker) {
  kv_event_errors_.Add({{"worker", worker}}).Increment();
}

void RouterMetrics::CountPrefill(const std::string& outcome) {
  prefills_.Add({{"outcome", outcome}}).Increment();
}

void RouterMetrics::ObservePrefillPhase(const std::string& phase, double seconds) {
  prefill_seconds_.Add({{"phase", phase}}, service::LatencyBuckets()).Observe(seconds);
}

void RouterMetrics::CountRequest(const std::string& api, const std::string& endpoint,
                                 const std::string& code) {
  requests_.Add({{"api", api}, {"endpoint", endpoint}, {"code", code}}).Increment();
}

void RouterMetrics::ObserveRequestSeconds(const std::string& endpoint, double seconds) {
  request_seconds_.Add({{"endpoint", endpoint}}, service::LatencyBuckets()).Observe(seconds);
}

}  // namespace baton::dispatch
