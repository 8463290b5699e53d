// One request's latency breakdown, and the line the router logs for it with
// --log-requests: where it ran, what the placement expected cached, what was, and where
// its time went (docs/routing.md, "Latency breakdown"). Both front doors fill it. Clients
// get the same timings: HTTP responses as "timings" beside "usage", gRPC responses as
// baton.v1.Timings.
//
//   RequestLog log(/*enabled=*/true);
//   log.Write(record);  // {"api":"http","request_id":"chatcmpl-…",…} and a newline, on stdout
#pragma once

#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>

namespace baton::frontdoor {

struct RequestTimings {
  double tokenize_seconds = 0;  // router: chat template and tokenization
  double route_seconds = 0;     // router: prompt block hashing and placement
  // Split requests; 0 when one worker served the whole request.
  double prefill_seconds = 0;              // the router's Prefill calls, every attempt
  double prefill_queue_seconds = 0;        // prefill worker: arrival to first scheduled
  double prefill_compute_seconds = 0;      // prefill worker: scheduled to first token
  double kv_transfer_seconds = 0;          // KV transfer not hidden behind the compute
  double queue_seconds = 0;                // serving worker: arrival to first scheduled
  double time_to_first_token_seconds = 0;  // router arrival to the first token sent
  double total_seconds = 0;                // router arrival to the end
};

struct RequestRecord {
  std::string_view api;           // "http" or "grpc"
  std::string request_id;         // the response's id: the client's, when it chose one
  std::string worker_request_id;  // the router's own id, which the workers log
  std::string status;             // HTTP: the status code; gRPC: the code's name
  std::string_view policy;
  std::string worker;          // the serving (decode or colocated) worker
  std::string prefill_worker;  // split requests
  bool rerouted = false;
  int64_t prompt_tokens = 0;
  int64_t expected_cached_tokens = 0;  // what the placement expected
  int64_t cached_tokens = 0;           // what the worker found
  int64_t completion_tokens = 0;
  RequestTimings timings;
};

// One JSON object, without a newline.
std::string RequestRecordJson(const RequestRecord& record);

class RequestLog {
 public:
  // `out` (default stdout, an access log beside the diagnostics on stderr) must outlive it.
  explicit RequestLog(bool enabled, std::FILE* out = nullptr);
  bool enabled() const { return enabled_; }
  // Writes the record as one line; lines from concurrent requests never interleave.
  void Write(const RequestRecord& record);

 private:
  bool enabled_;
  std::FILE* out_;
  std::mutex mu_;
};

}  // namespace baton::frontdoor
