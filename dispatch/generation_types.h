// What the router asks of a worker for one client request, and what it hands back to
// the API layer per sequence: deltas of token ids, final text and logprobs, and at the
// end the finish reason, usage and timings.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "baton/internal/v1/worker.pb.h"

namespace baton::dispatch {

// The prefill leg of a split request (docs/disaggregation.md), as the router saw it.
struct PrefillTimings {
  double seconds = 0;              // the router's Prefill calls, every attempt
  double queue_seconds = 0;        // prefill worker: arrival to first scheduled
  double compute_seconds = 0;      // prefill worker: scheduled to first token
  double kv_transfer_seconds = 0;  // KV transfer not hidden behind compute
};

struct GenerationRequest {
  std::string request_id;  // choice i runs in the worker as "<request_id>-<i>"
  std::vector<int32_t> prompt_ids;
  // Everything the worker applies: sampling, max_tokens, stop ids, EOS, logprobs. Stop
  // strings are the router's (below); params.stop must be empty.
  baton::internal::v1::SamplingParams params;
  std::vector<std::string> stop;
  bool include_stop_str_in_output = false;
  bool skip_special_tokens = true;
  int n = 1;  // choice i > 0 with a seed uses seed + i, so the choices differ
  int priority = 0;
  std::string cache_salt;
  std::string session;  // routing affinity key (prompt_cache_key); empty: none
  std::optional<std::chrono::system_clock::time_point> deadline;
  // Record the request's journey (docs/inspector.md): the workers' steps, times counted
  // from `arrival` (the router's).
  bool trace = false;
  std::chrono::steady_clock::time_point arrival;
};

struct TopLogprob {
  int32_t token_id = 0;
  std::string token;  // the token's bytes (may be part of a UTF-8 character)
  float logprob = 0;
};

struct TokenLogprob {
  int32_t token_id = 0;
  std::string token;
  float logprob = 0;
  std::vector<TopLogprob> top;
};

struct ChoiceDelta {
  int index = 0;
  std::vector<int32_t> token_ids;
  std::string text;  // final text: never a broken UTF-8 sequence or a stop string
  std::vector<TokenLogprob> logprobs;
  bool finished = false;
  // When the router read it from the worker, on the loop thread: a front door that hands
  // deltas to another thread times tokens (TTFT, inter-token) by this, not by when that
  // thread woke.
  std::chrono::steady_clock::time_point received;
  // On the final delta of a choice:
  std::string finish_reason;             // "stop" or "length"
  std::string stop_reason;               // the stop string, or the stop token id; empty for EOS
  std::optional<int32_t> stop_token_id;  // set when a stop id (not a string) ended it
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;
  int64_t completion_tokens = 0;
  double queue_seconds = 0;                // worker: arrival to first scheduled
  double time_to_first_token_seconds = 0;  // worker: arrival to first token
  int num_preemptions = 0;
  PrefillTimings prefill;  // zeros unless the choice was prefilled on another worker
  // GenerationRequest::trace: what the workers recorded (the steps, the prefill leg); the
  // front door completes it (dispatch/request_trace.h).
  std::shared_ptr<baton::v1::RequestTrace> trace;
};

}  // namespace baton::dispatch
