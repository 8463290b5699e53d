// The routing simulator's cluster: N colocated workers in simulated time, each with the
// engine's own page bookkeeping (kvcache::BlockManager: prefix cache, LRU eviction, KV
// events) and a continuous-batching step model, behind the router's own KvIndex and
// RoutingPolicy. Only time is simulated; the cache and the routing are the real code.
//
// Step model (calibrated from docs/perf/engine.md and docs/perf/batching.md, the 135M
// shape on the CI machine): a step costs step_seconds + prefill tokens x
// prefill_token_seconds + decoding sequences x decode_seq_seconds; a step takes at most
// token_budget prompt tokens (chunked prefill) and max_running sequences.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench/router_sim_workloads.h"
#include "routing/routing_policy.h"

namespace baton::bench {

struct StepModel {
  double step_seconds = 0.012;
  double prefill_token_seconds = 0.0022;
  double decode_seq_seconds = 0.0018;
  int64_t token_budget = 2048;
  int max_running = 64;
};

struct ClusterShape {
  int workers = 16;
  int64_t kv_blocks = 2048;  // pages per worker
  int64_t block_size = 16;
  double event_lag_seconds = 0.05;  // worker publishes -> router's index applies
  bool events = true;               // false: the index remembers what it sent (TTL)
  StepModel step;
};

struct SimResult {
  std::string policy;
  int64_t requests = 0;
  int64_t prompt_tokens = 0;
  int64_t hit_tokens = 0;     // found in the worker's prefix cache at admission
  int64_t expected_hits = 0;  // what the policy expected
  int64_t output_tokens = 0;
  double makespan_seconds = 0;  // first arrival to last answer
  double ttft_p50 = 0, ttft_p99 = 0;
  double decide_p50_us = 0, decide_p99_us = 0;  // wall time of Place
  int64_t evicted_blocks = 0;
  int64_t index_blocks = 0;     // at the end
  double ceiling_hit_rate = 0;  // one infinite cache: no placement does better

  double hit_rate() const {
    return prompt_tokens == 0 ? 0.0 : static_cast<double>(hit_tokens) / prompt_tokens;
  }
  double output_tokens_per_second() const {
    return makespan_seconds == 0 ? 0.0 : static_cast<double>(output_tokens) / makespan_seconds;
  }
};

// Replays `prompts` (plus chat follow-ups) through `policy`. Deterministic for a seed.
SimResult RunCluster(const ClusterShape& shape, const std::vector<SimPrompt>& prompts,
                     int max_turns, routing::RoutingPolicy* policy, uint64_t seed);

}  // namespace baton::bench
