// One request, start to finish, on the CPU runner (or a backend the options give): the path
// `baton generate` takes, and the single-sequence oracle the batched scheduler is compared
// with.
//
// Prefill runs in chunks, then one token per step; sampling, stop ids, stop strings and
// max_tokens decide the end. Text leaves through `on_text` as soon as it is final: never
// half a UTF-8 character, never a prefix of a stop string that may still complete.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/thread_pool.h"
#include "engine/backend.h"
#include "engine/loaded_model.h"
#include "engine/sampler.h"
#include "engine/sampling_params.h"
#include "kvcache/kv_pool.h"

namespace baton::engine {

struct GenerateOptions {
  int64_t prefill_chunk = 512;  // prompt tokens per forward
  int64_t block_size = 16;
  std::string kv_cache_dtype = "bf16";  // as EngineOptions::kv_cache_dtype
  bool prompt_logits = false;           // keep the logits of every prompt position
  // As EngineOptions' (the GPU backend sets both: engine/gpu_backend.h); unset: the CPU.
  std::function<absl::StatusOr<void*>(size_t bytes)> kv_pool_memory;
  std::function<absl::StatusOr<std::unique_ptr<Backend>>(kvcache::KvPool* pool,
                                                         ThreadPool* threads)>
      backend;
};

struct GenerateTimings {
  double prefill_seconds = 0;  // prompt forward passes and the first sample
  double decode_seconds = 0;   // every later step
  double time_to_first_token_seconds = 0;
};

struct GenerateResult {
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> output_ids;     // the stop token, if one ended it, is the last id
  std::vector<SampledToken> logprobs;  // one per output id when params.logprobs >= 0
  std::string text;                    // what on_text received, concatenated
  std::string finish_reason;           // "stop" or "length"
  std::string stop_reason;             // the stop string, or the stop token's id; else empty
  std::vector<std::vector<float>> prompt_logits;  // with GenerateOptions::prompt_logits
  GenerateTimings timings;
};

using TextSink = std::function<void(std::string_view)>;

// InvalidArgument when the prompt is empty, does not fit the context (the message gives
// both numbers, as vLLM's does), or the params are out of range. max_tokens is cut to
// what the context leaves.
absl::StatusOr<GenerateResult> Generate(const LoadedModel& model, ThreadPool* threads,
                                        std::vector<int32_t> prompt_ids,
                                        const SamplingParams& params,
                                        const GenerateOptions& options, const TextSink& on_text);

}  // namespace baton::engine
