#include "worker/worker_metrics.h"

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

}  // namespace

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
                          .Add({})),
      engine_(prometheus::BuildGauge()
                  .Name("baton_engine_state")
                  .Help("The engine's state at scrape time, by quantity")
                  .Register(*registry_)) {}

std::string WorkerMetrics::Render(const engine::Engine* engine) {
  if (engine != nullptr) {
    const engine::EngineStats s = engine->Stats();
    const std::pair<const char*, int64_t> values[] = {{"running", s.running},
                                                      {"waiting", s.waiting},
                                                      {"pages_total", s.pages_total},
                                                      {"pages_used", s.pages_used},
                                                      {"pages_free", s.pages_free},
                                                      {"pages_cached", s.pages_cached},
                                                      {"kv_reservations", s.kv_reservations}};
    for (const auto& [name, value] : values) {
      engine_.Add({{"quantity", name}}).Set(static_cast<double>(value));
    }
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
