#include "worker/worker_metrics.h"

#include <type_traits>

#include "absl/status/status.h"
#include "service/metrics.h"

namespace baton::worker {
namespace {

// 64 KiB to 16 GiB, one bucket per factor of 4: a block of a small model up to a long
// prompt of a large one.
prometheus::Histogram::BucketBoundaries ByteBuckets() {
  prometheus::Histogram::BucketBoundaries out;
  for (double b = 65536; b <= 17179869184.0; b *= 4) out.push_back(b);
  return out;
}

// vLLM's finished_reason values: stop, length, abort (cancelled); and error.
std::string FinishedReason(const engine::TokenEvent& last) {
  if (absl::IsCancelled(last.status)) return "abort";
  if (!last.status.ok()) return "error";
  if (last.finish_reason == engine::FinishReason::kLength) return "length";
  return "stop";
}

template <typename T>
prometheus::Family<T>& Register(prometheus::Registry& r, const char* name, const char* help) {
  if constexpr (std::is_same_v<T, prometheus::Gauge>) {
    return prometheus::BuildGauge().Name(name).Help(help).Register(r);
  } else if constexpr (std::is_same_v<T, prometheus::Counter>) {
    return prometheus::BuildCounter().Name(name).Help(help).Register(r);
  } else {
    return prometheus::BuildHistogram().Name(name).Help(help).Register(r);
  }
}

}  // namespace

struct WorkerMetrics::EngineSeries {
  EngineSeries(prometheus::Registry& r, const std::string& model,
               const service::HistogramBuckets& b, int64_t max_model_len)
      : labels{{"model_name", model}},
        running(Register<prometheus::Gauge>(r, "baton_num_requests_running",
                                            "Requests in the engine's running batch")
                    .Add(labels)),
        waiting(Register<prometheus::Gauge>(r, "baton_num_requests_waiting",
                                            "Requests queued in the engine, not yet running")
                    .Add(labels)),
        kv_usage(Register<prometheus::Gauge>(
                     r, "baton_kv_cache_usage_ratio",
                     "KV cache pages held by running requests over all pages (0 to 1)")
                     .Add(labels)),
        pages_capacity(Register<prometheus::Gauge>(r, "baton_kv_cache_pages_capacity",
                                                   "KV cache pages in the pool")
                           .Add(labels)),
        pages_used(
            Register<prometheus::Gauge>(r, "baton_kv_cache_pages_used",
                                        "KV cache pages held by running requests and reservations")
                .Add(labels)),
        pages_free(Register<prometheus::Gauge>(r, "baton_kv_cache_pages_free",
                                               "KV cache pages free or cached and evictable")
                       .Add(labels)),
        pages_cached(Register<prometheus::Gauge>(r, "baton_kv_cache_pages_cached",
                                                 "KV cache pages holding prefix-cached blocks")
                         .Add(labels)),
        reservations(Register<prometheus::Gauge>(
                         r, "baton_kv_reservations_pending",
                         "Decode side: reservations for incoming KV transfers not yet admitted")
                         .Add(labels)),
        prefix_queried(Register<prometheus::Counter>(r, "baton_prefix_cache_queried_tokens_total",
                                                     "Prompt tokens looked up in the prefix cache")
                           .Add(labels)),
        prefix_hit(Register<prometheus::Counter>(r, "baton_prefix_cache_hit_tokens_total",
                                                 "Prompt tokens found in the prefix cache")
                       .Add(labels)),
        preemptions(Register<prometheus::Counter>(
                        r, "baton_num_preemptions_total",
                        "Running requests preempted (their pages freed) to make room")
                        .Add(labels)),
        iteration_tokens(
            Register<prometheus::Histogram>(r, "baton_iteration_tokens",
                                            "Tokens computed per engine step (prompt and "
                                            "generated, all sequences of the batch)")
                .Add(labels, b.For("iteration_tokens", service::IterationTokenBuckets()))),
        prompt_tokens(Register<prometheus::Histogram>(r, "baton_request_prompt_tokens",
                                                      "Prompt tokens per ended request")
                          .Add(labels, b.For("request_prompt_tokens",
                                             service::TokenCountBuckets(max_model_len)))),
        generation_tokens(Register<prometheus::Histogram>(r, "baton_request_generation_tokens",
                                                          "Tokens generated per ended request")
                              .Add(labels, b.For("request_generation_tokens",
                                                 service::TokenCountBuckets(max_model_len)))),
        queue_seconds(Register<prometheus::Histogram>(
                          r, "baton_request_queue_time_seconds",
                          "Arrival at the engine to first scheduled, per ended request")
                          .Add(labels, b.For("request_queue_time_seconds",
                                             service::RequestLatencyBuckets()))),
        prefill_seconds(Register<prometheus::Histogram>(
                            r, "baton_request_prefill_time_seconds",
                            "First scheduled to first token, per request that produced one")
                            .Add(labels, b.For("request_prefill_time_seconds",
                                               service::RequestLatencyBuckets()))),
        decode_seconds(Register<prometheus::Histogram>(
                           r, "baton_request_decode_time_seconds",
                           "First token to the request's end, per request that produced one")
                           .Add(labels, b.For("request_decode_time_seconds",
                                              service::RequestLatencyBuckets()))),
        success(Register<prometheus::Counter>(
            r, "baton_request_success_total",
            "Requests ended by the engine, by finished_reason (stop, length, abort, error)")) {}

  prometheus::Labels labels;
  prometheus::Gauge& running;
  prometheus::Gauge& waiting;
  prometheus::Gauge& kv_usage;
  prometheus::Gauge& pages_capacity;
  prometheus::Gauge& pages_used;
  prometheus::Gauge& pages_free;
  prometheus::Gauge& pages_cached;
  prometheus::Gauge& reservations;
  prometheus::Counter& prefix_queried;
  prometheus::Counter& prefix_hit;
  prometheus::Counter& preemptions;
  prometheus::Histogram& iteration_tokens;
  prometheus::Histogram& prompt_tokens;
  prometheus::Histogram& generation_tokens;
  prometheus::Histogram& queue_seconds;
  prometheus::Histogram& prefill_seconds;
  prometheus::Histogram& decode_seconds;
  prometheus::Family<prometheus::Counter>& success;
};

WorkerMetrics::WorkerMetrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      bytes_(prometheus::BuildHistogram()
                 .Name("baton_kv_transfer_bytes")
                 .Help("Prompt K/V bytes per completed KV transfer, by side (sender, receiver)")
                 .Register(*registry_)),
      seconds_(prometheus::BuildHistogram()
                   .Name("baton_kv_transfer_seconds")
                   .Help("Sender: first put posted to last put landed, per completed transfer")
                   .Register(*registry_)),
      exposed_(prometheus::BuildHistogram()
                   .Name("baton_kv_transfer_exposed_seconds")
                   .Help("Sender: waiting for puts at the ends of the prompt's steps, summed")
                   .Register(*registry_)
                   .Add({}, service::LatencyBuckets())),
      failed_(prometheus::BuildCounter()
                  .Name("baton_kv_transfers_failed_total")
                  .Help("KV transfers that failed, by side and reason")
                  .Register(*registry_)),
      expired_(prometheus::BuildCounter()
                   .Name("baton_kv_leases_expired_total")
                   .Help("Receiver: reservations whose lease ended before they were used")
                   .Register(*registry_)
                   .Add({})),
      leases_held_(prometheus::BuildGauge()
                       .Name("baton_kv_leases_held")
                       .Help("Receiver: reservations under a lease now")
                       .Register(*registry_)
                       .Add({})),
      pages_reserved_(prometheus::BuildGauge()
                          .Name("baton_kv_pages_reserved")
                          .Help("Receiver: KV pages those reservations hold")
                          .Register(*registry_)
                          .Add({})) {}

WorkerMetrics::~WorkerMetrics() = default;

void WorkerMetrics::SetModel(const std::string& model_name,
                             const service::HistogramBuckets& buckets, int64_t max_model_len) {
  engine_ = std::make_unique<EngineSeries>(*registry_, model_name, buckets, max_model_len);
}

void WorkerMetrics::ObserveStep(int64_t tokens) {
  engine_->iteration_tokens.Observe(static_cast<double>(tokens));
}

void WorkerMetrics::ObserveRequestEnd(const engine::TokenEvent& last) {
  EngineSeries& e = *engine_;
  prometheus::Labels labels = e.labels;
  labels["finished_reason"] = FinishedReason(last);
  e.success.Add(labels).Increment();
  e.prompt_tokens.Observe(static_cast<double>(last.usage.prompt_tokens));
  e.generation_tokens.Observe(static_cast<double>(last.usage.completion_tokens));
  const engine::RequestTimings& t = last.timings;
  e.queue_seconds.Observe(t.queue_seconds);
  // A request that produced no token of its own (failed or cancelled first, or resumed
  // with nothing more to say) has no prefill or decode phase.
  if (t.time_to_first_token_seconds > 0) {
    e.prefill_seconds.Observe(t.time_to_first_token_seconds - t.queue_seconds);
    e.decode_seconds.Observe(t.total_seconds - t.time_to_first_token_seconds);
  }
}

std::string WorkerMetrics::Render(const engine::Engine* engine) {
  if (engine != nullptr && engine_ != nullptr) {
    const engine::EngineStats s = engine->Stats();
    EngineSeries& e = *engine_;
    e.running.Set(static_cast<double>(s.running));
    e.waiting.Set(static_cast<double>(s.waiting));
    e.kv_usage.Set(s.pages_total > 0
                       ? static_cast<double>(s.pages_used) / static_cast<double>(s.pages_total)
                       : 0.0);
    e.pages_capacity.Set(static_cast<double>(s.pages_total));
    e.pages_used.Set(static_cast<double>(s.pages_used));
    e.pages_free.Set(static_cast<double>(s.pages_free));
    e.pages_cached.Set(static_cast<double>(s.pages_cached));
    e.reservations.Set(static_cast<double>(s.kv_reservations));
    std::lock_guard<std::mutex> lock(render_mu_);
    // Counters only go up: the engine's counts are cumulative, so add what is new.
    const auto advance = [](prometheus::Counter& c, int64_t now, int64_t* last) {
      if (now > *last) c.Increment(static_cast<double>(now - *last));
      *last = now;
    };
    advance(e.prefix_queried, s.prefix_queried_tokens, &last_queried_);
    advance(e.prefix_hit, s.prefix_hit_tokens, &last_hit_);
    advance(e.preemptions, s.preemptions, &last_preemptions_);
  }
  return service::RenderMetrics(*registry_);
}

void WorkerMetrics::ObserveSent(uint64_t bytes, double transfer_seconds, double exposed_seconds) {
  bytes_.Add({{"side", "sender"}}, ByteBuckets()).Observe(static_cast<double>(bytes));
  seconds_.Add({}, service::LatencyBuckets()).Observe(transfer_seconds);
  exposed_.Observe(exposed_seconds);
}

void WorkerMetrics::ObserveReceived(uint64_t bytes) {
  bytes_.Add({{"side", "receiver"}}, ByteBuckets()).Observe(static_cast<double>(bytes));
}

void WorkerMetrics::CountFailed(const std::string& side, const std::string& reason) {
  failed_.Add({{"side", side}, {"reason", reason}}).Increment();
}

}  // namespace baton::worker
