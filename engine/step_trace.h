// What a traced request (EngineRequest::trace) records of each engine step it takes part
// in: the request inspector's raw material (docs/inspector.md). The engine hands the steps
// out with the token events, so that a request stopped early (a router's stop string
// cancels it) has already delivered them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "common/trace_bounds.h"
#include "engine/sampler.h"

namespace baton::engine {

// Layers [first_layer, first_layer + layers) of one prompt chunk, as handed to its KV sink.
struct TraceLayerGroup {
  int32_t first_layer = 0;
  int32_t layers = 0;
  double done_seconds = 0;  // since the step's start: the group's last layer was written
  int64_t kv_bytes = 0;     // the request's K/V the group wrote
};

struct StepTrace {
  double start_seconds = 0;  // since the request's arrival (Submit)
  double forward_seconds = 0;
  double sample_seconds = 0;   // the whole batch's sampling
  double kv_wait_seconds = 0;  // the request's KV sink draining its puts
  int32_t batch_sequences = 0;
  int32_t batch_tokens = 0;
  int32_t tokens = 0;  // this request's tokens in the step
  int64_t context_tokens = 0;
  bool prefill = false;
  int64_t kv_bytes = 0;  // context_tokens x the cache's bytes per token
  std::vector<TraceLayerGroup> layer_groups;
  std::optional<SampledToken> sampled;  // with at least kTraceTopLogprobs alternatives
};

}  // namespace baton::engine
