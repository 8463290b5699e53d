#include "frontdoor/openai/request_log.h"

#include "nlohmann/json.hpp"

namespace baton::frontdoor {

std::string RequestRecordJson(const RequestRecord& r) {
  const RequestTimings& t = r.timings;
  nlohmann::ordered_json seconds = {
      {"tokenize", t.tokenize_seconds},
      {"route", t.route_seconds},
      {"prefill", t.prefill_seconds},
      {"prefill_queue", t.prefill_queue_seconds},
      {"prefill_compute", t.prefill_compute_seconds},
      {"kv_transfer", t.kv_transfer_seconds},
      {"queue", t.queue_seconds},
      {"time_to_first_token", t.time_to_first_token_seconds},
      {"total", t.total_seconds},
  };
  nlohmann::ordered_json out = {
      {"api", r.api},
      {"request_id", r.request_id},
      {"worker_request_id", r.worker_request_id},
      {"status", r.status},
      {"policy", r.policy},
      {"worker", r.worker},
      {"prefill_worker", r.prefill_worker},
      {"rerouted", r.rerouted},
      {"prompt_tokens", r.prompt_tokens},
      {"expected_cached_tokens", r.expected_cached_tokens},
      {"cached_tokens", r.cached_tokens},
      {"completion_tokens", r.completion_tokens},
      {"seconds", std::move(seconds)},
  };
  // A request id is the client's bytes: invalid UTF-8 becomes U+FFFD, not an exception.
  return out.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

RequestLog::RequestLog(bool enabled, std::FILE* out)
    : enabled_(enabled), out_(out != nullptr ? out : stdout) {}

void RequestLog::Write(const RequestRecord& record) {
  if (!enabled_) return;
  const std::string line = RequestRecordJson(record) + "\n";
  std::lock_guard<std::mutex> lock(mu_);
  std::fwrite(line.data(), 1, line.size(), out_);
  std::fflush(out_);
}

}  // namespace baton::frontdoor
