// The text form of a traced request (`baton trace` without --json): the journey of one
// request as a reader scans it, top to bottom (docs/inspector.md, "baton trace").
//
//   nlohmann::json r = {{"text", ...}, {"finish_reason", ...}, {"usage", ...},
//                       {"trace", <baton.v1.RequestTrace as JSON>}};
//   std::cout << RenderTrace(r);
#pragma once

#include <cstdint>
#include <string>

#include "nlohmann/json.hpp"

namespace baton::tools {

// The sections, in order: header, prompt tokens, route, prefill leg, decode steps,
// memory, totals. Missing fields read as zero or empty: a trace from an older router
// still renders.
std::string RenderTrace(const nlohmann::json& result);

// "512 B", "1.5 KiB", "2.6 MiB", "1.2 GiB".
std::string FormatBytes(double bytes);
// "0.42 ms", "12.3 ms", "1.25 s".
std::string FormatSeconds(double seconds);

// The context length at which this request's K/V would pass the model's weights; -1 when
// kv_bytes_per_token is not positive.
int64_t KvOvertakesWeightsAt(int64_t weight_bytes, int64_t kv_bytes_per_token);

}  // namespace baton::tools
