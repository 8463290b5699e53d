// Token-level stop conditions: EOS, stop_token_ids and max_tokens, with OpenAI's
// finish_reason semantics ("stop" for EOS, a stop token or a stop string; "length" for
// max_tokens or a full context). Stop strings are StopStringMatcher's (tokenizer/stop_strings.h).
//
//   StopChecker stop(params, model_eos_ids, max_model_len - prompt_len);
//   StopDecision d = stop.Check(token, num_output_tokens_including_it);
//   if (d.emit_text) text = detok.Add(token) ...
//   if (d.reason != FinishReason::kNone) finish
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "engine/sampling_params.h"

namespace baton::engine {

enum class FinishReason { kNone, kStop, kLength };

// OpenAI's finish_reason string: "stop", "length", or "" for kNone.
std::string_view FinishReasonName(FinishReason reason);

struct StopDecision {
  FinishReason reason = FinishReason::kNone;
  // Set when one of params.stop_token_ids stopped the sequence (vLLM's stop_reason); EOS
  // leaves it empty.
  std::optional<int32_t> stop_token_id;
  // Whether the token's text belongs in the output: not for a stop token (EOS or
  // stop_token_ids) unless include_stop_str_in_output, as in vLLM.
  bool emit_text = true;
};

class StopChecker {
 public:
  // `eos_token_ids`: the model's end tokens (several for e.g. Llama 3's <|eot_id|> and
  // <|end_of_text|>). `context_room`: output tokens that still fit the context window;
  // the length limit is the smaller of it and params.max_tokens.
  StopChecker(const SamplingParams& params, std::span<const int32_t> eos_token_ids,
              int64_t context_room = std::numeric_limits<int64_t>::max());

  // Decides after `token` was generated; `num_output_tokens` counts it. A stop token wins
  // over the length limit when both apply, as in vLLM.
  StopDecision Check(int32_t token, int64_t num_output_tokens) const;

 private:
  std::vector<int32_t> eos_;   // empty when ignore_eos
  std::vector<int32_t> stop_;  // params.stop_token_ids
  int64_t max_output_tokens_;
  bool include_stop_;
};

}  // namespace baton::engine
