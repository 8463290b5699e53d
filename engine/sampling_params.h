// What a request asks of the sampler and of the stop conditions. Field names and meanings
// follow the OpenAI API and vLLM's SamplingParams, so the front door maps them 1:1.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace baton::engine {

// Constrained decoding (docs/structured_outputs.md): every sampled token keeps the output a
// prefix of a document the grammar accepts, and the sequence may end only once the
// document is complete. The engine compiles the grammar (engine/grammar_cache.h).
struct OutputConstraint {
  enum class Kind { kNone, kJsonObject, kJsonSchema };
  Kind kind = Kind::kNone;
  std::string json_schema;  // kJsonSchema: the schema's JSON text
};

struct SamplingParams {
  double temperature = 1.0;         // 0: greedy (argmax; ties go to the lowest id)
  int64_t top_k = 0;                // 0 or -1: off
  double top_p = 1.0;               // (0, 1]
  double min_p = 0.0;               // [0, 1]: drop tokens with p < min_p * p_max
  double repetition_penalty = 1.0;  // HF/vLLM: over prompt and output tokens; > 0
  double presence_penalty = 0.0;    // OpenAI: over output tokens; [-2, 2]
  double frequency_penalty = 0.0;   // OpenAI: over output tokens; [-2, 2]
  std::vector<std::pair<int32_t, float>> logit_bias;  // added to the raw logits; [-100, 100]
  std::optional<uint64_t> seed;                       // absent: a fresh random seed per request
  int32_t logprobs = -1;  // -1: none; N >= 0: the chosen token's logprob + top N

  int64_t max_tokens = 16;              // generated tokens, >= 1
  std::vector<int32_t> stop_token_ids;  // besides EOS
  std::vector<std::string> stop;        // stop strings; not included in the output
  bool ignore_eos = false;
  bool include_stop_str_in_output = false;
  OutputConstraint constraint;
};

// Fixed bounds, the same as vLLM's where vLLM has one (docs/sampling.md says why each).
inline constexpr double kMaxTemperature = 100.0;
inline constexpr double kMaxRepetitionPenalty = 2.0;
inline constexpr double kMaxAbsPresenceFrequencyPenalty = 2.0;
inline constexpr double kMaxAbsLogitBias = 100.0;

// Bounds a deployment may tighten or relax.
struct SamplingLimits {
  int32_t max_logprobs = 20;
  size_t max_stop_strings = 16;
  size_t max_stop_string_bytes = 256;
  size_t max_stop_token_ids = 256;
  size_t max_logit_bias = 1024;
  int64_t max_tokens = 1 << 20;
};

// InvalidArgument naming the parameter and its bound, for any field out of range;
// token ids are checked against vocab_size.
absl::Status ValidateSamplingParams(const SamplingParams& params, int64_t vocab_size,
                                    const SamplingLimits& limits = {});

}  // namespace baton::engine
