#include "engine/sampling_params.h"

#include <cmath>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "common/check.h"
#include "common/param_error.h"
#include "common/status.h"
#include "common/strings.h"
#include "common/utf8.h"

namespace baton::engine {
namespace {

// Each error names the parameter it is about (common/param_error.h), so that the front
// door can tell the client which field was wrong even when the worker found it.
absl::Status Invalid(std::string_view param, const std::string& message) {
  return ParamError(param, message);
}

// Written as "!(in range)" so that NaN, which fails every comparison, is rejected too.
bool InClosed(double v, double lo, double hi) { return v >= lo && v <= hi; }

absl::Status CheckTokenId(const char* what, int32_t id, int64_t vocab_size) {
  if (id < 0 || id >= vocab_size) {
    return Invalid(what,
                   baton::StrCat(what, " token id must be in [0, ", vocab_size, "), got ", id));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateSamplingParams(const SamplingParams& params, int64_t vocab_size,
                                    const SamplingLimits& limits) {
  BATON_CHECK(vocab_size > 0);
  const SamplingParams& p = params;
  if (!InClosed(p.temperature, 0.0, kMaxTemperature)) {
    return Invalid("temperature", baton::StrCat("temperature must be in [0, ", kMaxTemperature,
                                                "], got ", p.temperature));
  }
  if (p.top_k < -1 || p.top_k > vocab_size) {
    return Invalid("top_k", baton::StrCat("top_k must be -1 or 0 (off) or in [1, ", vocab_size,
                                          "] (the vocabulary size), got ", p.top_k));
  }
  if (!(p.top_p > 0.0 && p.top_p <= 1.0)) {
    return Invalid("top_p", baton::StrCat("top_p must be in (0, 1], got ", p.top_p));
  }
  if (!InClosed(p.min_p, 0.0, 1.0)) {
    return Invalid("min_p", baton::StrCat("min_p must be in [0, 1], got ", p.min_p));
  }
  if (!(p.repetition_penalty > 0.0 && p.repetition_penalty <= kMaxRepetitionPenalty)) {
    return Invalid("repetition_penalty",
                   baton::StrCat("repetition_penalty must be in (0, ", kMaxRepetitionPenalty,
                                 "], got ", p.repetition_penalty));
  }
  const double max_pf = kMaxAbsPresenceFrequencyPenalty;
  if (!InClosed(p.presence_penalty, -max_pf, max_pf)) {
    return Invalid("presence_penalty", baton::StrCat("presence_penalty must be in [", -max_pf, ", ",
                                                     max_pf, "], got ", p.presence_penalty));
  }
  if (!InClosed(p.frequency_penalty, -max_pf, max_pf)) {
    return Invalid("frequency_penalty",
                   baton::StrCat("frequency_penalty must be in [", -max_pf, ", ", max_pf, "], got ",
                                 p.frequency_penalty));
  }

  if (p.logit_bias.size() > limits.max_logit_bias) {
    return Invalid("logit_bias",
                   baton::StrCat("logit_bias may have at most ", limits.max_logit_bias,
                                 " entries, got ", p.logit_bias.size()));
  }
  absl::flat_hash_set<int32_t> biased;
  for (const auto& [id, bias] : p.logit_bias) {
    BATON_RETURN_IF_ERROR(CheckTokenId("logit_bias", id, vocab_size));
    if (!InClosed(bias, -kMaxAbsLogitBias, kMaxAbsLogitBias)) {
      return Invalid("logit_bias",
                     baton::StrCat("logit_bias values must be in [", -kMaxAbsLogitBias, ", ",
                                   kMaxAbsLogitBias, "], got ", bias, " for token ", id));
    }
    // Two entries for one id would leave it unclear whether they add or override.
    if (!biased.insert(id).second) {
      return Invalid("logit_bias", baton::StrCat("logit_bias names token ", id, " more than once"));
    }
  }

  if (p.logprobs < -1 || p.logprobs > limits.max_logprobs) {
    return Invalid("logprobs", baton::StrCat("logprobs must be -1 (none) or in [0, ",
                                             limits.max_logprobs, "], got ", p.logprobs));
  }
  if (p.max_tokens < 1 || p.max_tokens > limits.max_tokens) {
    return Invalid("max_tokens", baton::StrCat("max_tokens must be in [1, ", limits.max_tokens,
                                               "], got ", p.max_tokens));
  }

  if (p.stop_token_ids.size() > limits.max_stop_token_ids) {
    return Invalid("stop_token_ids",
                   baton::StrCat("stop_token_ids may have at most ", limits.max_stop_token_ids,
                                 " entries, got ", p.stop_token_ids.size()));
  }
  for (int32_t id : p.stop_token_ids) {
    BATON_RETURN_IF_ERROR(CheckTokenId("stop_token_ids", id, vocab_size));
  }

  if (p.stop.size() > limits.max_stop_strings) {
    return Invalid("stop", baton::StrCat("stop may have at most ", limits.max_stop_strings,
                                         " strings, got ", p.stop.size()));
  }
  for (size_t i = 0; i < p.stop.size(); ++i) {
    const std::string& s = p.stop[i];
    if (s.empty()) return Invalid("stop", baton::StrCat("stop[", i, "] must not be empty"));
    if (s.size() > limits.max_stop_string_bytes) {
      return Invalid("stop", baton::StrCat("stop[", i, "] must be at most ",
                                           limits.max_stop_string_bytes, " bytes, got ", s.size()));
    }
    // Matching is on bytes; a valid stop string can then only match at character
    // boundaries of the (valid) generated text, so emitted text never splits a character.
    if (!IsValidUtf8(s)) return Invalid("stop", baton::StrCat("stop[", i, "] must be valid UTF-8"));
  }
  return absl::OkStatus();
}

}  // namespace baton::engine
