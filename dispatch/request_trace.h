// The router's half of a request's journey (docs/inspector.md): the workers' steps arrive
// with the final delta (ChoiceDelta::trace); CompleteTrace adds what only the router
// knows (the prompt's tokens, the routing decision, its own clock) and gives every token
// its text. Both front doors call it, so `trace` means the same on HTTP and gRPC.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include <memory>
#include "baton/internal/v1/worker.pb.h"
#include "baton/v1/trace.pb.h"
#include "common/trace_bounds.h"
#include "tokenizer/tokenizer.h"

namespace baton::dispatch {

struct TraceFacts {
  const tokenizer::Tokenizer* tokenizer = nullptr;
  std::string model;
  std::span<const int32_t> prompt_ids;
  std::shared_ptr<const baton::v1::RouteTrace> route;  // Route::explanation
  double route_seconds = 0;
  bool rerouted = false;
  // The serving worker's GetModelInfo: weight and KV bytes.
  const baton::internal::v1::GetModelInfoResponse* model_info = nullptr;
  const baton::internal::v1::SamplingParams* params = nullptr;
  double tokenize_seconds = 0;
  double time_to_first_token_seconds = 0;
  double total_seconds = 0;
  double queue_seconds = 0;
  int64_t cached_tokens = 0;
  int64_t completion_tokens = 0;
};

// Completes `trace` (the final delta's) in place.
void CompleteTrace(const TraceFacts& facts, baton::v1::RequestTrace* trace);

}  // namespace baton::dispatch
