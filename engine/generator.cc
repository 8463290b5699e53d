#include "engine/generator.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "common/status.h"
#include "common/strings.h"
#include "engine/model_runner.h"
#include "engine/stop_conditions.h"
#include "kvcache/kv_pool.h"
#include "tokenizer/text_stream.h"

namespace baton::engine {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

absl::StatusOr<GenerateResult> Generate(const LoadedModel& loaded, ThreadPool* threads,
                                        std::vector<int32_t> prompt_ids,
                                        const SamplingParams& params,
                                        const GenerateOptions& options, const TextSink& on_text) {
  const model::ModelConfig& config = loaded.model->config();
  BATON_RETURN_IF_ERROR(ValidateSamplingParams(params, config.vocab_size));
  if (prompt_ids.empty()) {
    return absl::InvalidArgumentError("the prompt is empty: give at least one token");
  }
  const int64_t context = config.max_position_embeddings;
  const int64_t prompt_len = static_cast<int64_t>(prompt_ids.size());
  if (prompt_len >= context) {
    return absl::InvalidArgumentError(StrCat(
        "This model's maximum context length is ", context, " tokens. However, your prompt has ",
        prompt_len, " tokens, which leaves no room to generate. Shorten the prompt."));
  }
  if (options.prefill_chunk < 1) {
    return absl::InvalidArgumentError("prefill_chunk must be >= 1");
  }
  const int64_t capacity = prompt_len + std::min(params.max_tokens, context - prompt_len);

  BATON_RETURN_IF_ERROR(kvcache::CheckKvCacheDtype(options.kv_cache_dtype));
  const kvcache::PageLayout layout =
      PageLayoutFor(config, options.block_size, options.kv_cache_dtype);
  const int64_t pages = (capacity + options.block_size - 1) / options.block_size;
  void* memory = nullptr;
  if (options.kv_pool_memory) {
    BATON_ASSIGN_OR_RETURN(
        memory, options.kv_pool_memory(static_cast<size_t>(pages * layout.page_bytes())));
  }
  BATON_ASSIGN_OR_RETURN(std::unique_ptr<kvcache::KvPool> pool,
                         kvcache::KvPool::Create(layout, pages, memory));
  std::vector<int32_t> blocks;
  while (pool->num_free_blocks() > 0) blocks.push_back(*pool->Allocate());
  std::unique_ptr<Backend> runner;
  if (options.backend) {
    BATON_ASSIGN_OR_RETURN(runner, options.backend(pool.get(), threads));
  } else {
    runner = std::make_unique<ModelRunner>(*loaded.model, pool.get(), threads);
  }

  const StopChecker stop_tokens(params, loaded.eos_token_ids, context - prompt_len);
  SequenceSampler sampler(params, prompt_ids, params.seed.value_or(RandomSeed()));
  sampler.set_vocab_limit(SampleableVocab(loaded));
  tokenizer::TextStream stream(loaded.tokenizer.tokenizer, params.stop,
                               params.include_stop_str_in_output);

  GenerateResult result;
  result.prompt_ids = prompt_ids;
  auto emit = [&](const std::string& text) {
    if (text.empty()) return;
    result.text += text;
    if (on_text) on_text(text);
  };

  const auto start = Clock::now();
  ForwardOutput out;
  std::vector<int32_t> tokens = std::move(prompt_ids);
  int64_t pos = 0;
  // Prefill in chunks; only the last chunk needs logits unless all were asked for.
  while (pos < prompt_len) {
    const int64_t n = std::min(options.prefill_chunk, prompt_len - pos);
    const bool last = pos + n == prompt_len;
    const LogitsWanted wanted = options.prompt_logits ? LogitsWanted::kAll
                                : last                ? LogitsWanted::kLast
                                                      : LogitsWanted::kNone;
    const SequenceInput input{std::span(tokens).subspan(pos, n), pos, blocks, wanted};
    BATON_RETURN_IF_ERROR(runner->Forward(std::span(&input, 1), &out));
    if (options.prompt_logits) {
      for (int64_t i = 0; i < n; ++i) {
        auto row = out.row(i);
        result.prompt_logits.emplace_back(row.begin(), row.end());
      }
    }
    pos += n;
  }

  auto decode_start = start;
  for (int64_t step = 0;; ++step) {
    std::span<const float> logits = options.prompt_logits && step == 0
                                        ? std::span<const float>(result.prompt_logits.back())
                                        : out.row(out.first_row[0]);
    SampledToken token = sampler.Sample(logits);
    sampler.Accept(token.id);
    result.output_ids.push_back(token.id);
    if (params.logprobs >= 0) result.logprobs.push_back(token);
    if (step == 0) {
      decode_start = Clock::now();
      result.timings.time_to_first_token_seconds = Seconds(start, decode_start);
      result.timings.prefill_seconds = result.timings.time_to_first_token_seconds;
    }
    const StopDecision decision = stop_tokens.Check(token.id, step + 1);
    if (decision.emit_text) {
      // The sampler draws only ids the tokenizer has (SampleableVocab).
      BATON_ASSIGN_OR_RETURN(tokenizer::TextStream::Piece piece, stream.Add(token.id));
      emit(piece.text);
      if (piece.stopped) {
        result.finish_reason = "stop";
        result.stop_reason = std::move(piece.matched);
        break;
      }
    }
    if (decision.reason != FinishReason::kNone) {
      result.finish_reason = std::string(FinishReasonName(decision.reason));
      if (decision.stop_token_id) result.stop_reason = StrCat(*decision.stop_token_id);
      break;
    }
    tokens.push_back(token.id);
    const SequenceInput input{std::span(tokens).last(1), pos, blocks, LogitsWanted::kLast};
    BATON_RETURN_IF_ERROR(runner->Forward(std::span(&input, 1), &out));
    ++pos;
  }
  // The end of the text: bytes the detokenizer or the stop matcher held back.
  tokenizer::TextStream::Piece tail = stream.Finish();
  emit(tail.text);
  if (tail.stopped) {
    result.finish_reason = "stop";
    result.stop_reason = std::move(tail.matched);
  }
  result.timings.decode_seconds = Seconds(decode_start, Clock::now());
  return result;
}

}  // namespace baton::engine
