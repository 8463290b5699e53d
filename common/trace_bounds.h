// The bounds of a traced request (docs/inspector.md), shared by the engine that records
// its steps and the router that refuses what would outgrow them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace baton {

// Top logprobs a traced request's tokens carry, at least.
inline constexpr int kTraceTopLogprobs = 5;
// Steps a worker records per request; past it the trace is marked truncated.
inline constexpr size_t kMaxTraceSteps = 8192;
// A prefill chunk with a KV transfer reports its layers in at most this many groups.
inline constexpr int kTraceLayerGroups = 8;
// What the router accepts with `trace`: output tokens (an unset max_tokens becomes this)
// and prompt tokens.
inline constexpr int64_t kMaxTraceOutputTokens = 2048;
inline constexpr int64_t kMaxTracePromptTokens = 8192;
// The JSON size the largest trace these bounds allow stays under (both workers at
// kMaxTraceSteps: tests/unit/router/trace_bounds_test.cc measures it).
inline constexpr int64_t kMaxTraceJsonBytes = int64_t{16} << 20;

}  // namespace baton
