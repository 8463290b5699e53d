#include "engine/stop_conditions.h"

#include <algorithm>

namespace baton::engine {

std::string_view FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kNone:
      break;
  }
  return "";
}

StopChecker::StopChecker(const SamplingParams& params, std::span<const int32_t> eos_token_ids,
                         int64_t context_room)
    : stop_(params.stop_token_ids),
      max_output_tokens_(std::min(params.max_tokens, context_room)),
      include_stop_(params.include_stop_str_in_output) {
  if (!params.ignore_eos) eos_.assign(eos_token_ids.begin(), eos_token_ids.end());
}

StopDecision StopChecker::Check(int32_t token, int64_t num_output_tokens) const {
  StopDecision d;
  // Both lists are a handful of ids: a linear scan beats hashing.
  const bool is_eos = std::find(eos_.begin(), eos_.end(), token) != eos_.end();
  const bool is_stop = std::find(stop_.begin(), stop_.end(), token) != stop_.end();
  if (is_eos || is_stop) {
    d.reason = FinishReason::kStop;
    if (is_stop) d.stop_token_id = token;
    d.emit_text = include_stop_;
  } else if (num_output_tokens >= max_output_tokens_) {
    d.reason = FinishReason::kLength;
  }
  return d;
}

}  // namespace baton::engine
