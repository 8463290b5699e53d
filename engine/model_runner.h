// Runs the Llama-family forward pass on the CPU over a ragged batch.
//
// One Forward call takes several sequences, each with some new tokens: a prefill chunk,
// or one decode token. Each sequence brings its block table; the runner writes the new
// tokens' K/V into those pages and attends over everything before them. Every per-token
// computation is independent of the rest of the batch (see kernels/cpu/matmul.h), so a
// sequence's logits are bit-identical whether it runs alone, chunked, or batched.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/thread_pool.h"
#include "engine/kv_pool.h"
#include "model/model.h"

namespace baton::engine {

enum class LogitsWanted { kNone, kLast, kAll };

struct SequenceInput {
  std::span<const int32_t> tokens;       // the new tokens, at positions start_pos...
  int64_t start_pos = 0;                 // tokens already in this sequence's KV pages
  std::span<const int32_t> block_table;  // pages covering [0, start_pos + tokens.size())
  LogitsWanted logits = LogitsWanted::kLast;
};

struct ForwardOutput {
  // Rows of vocab_size floats, for the sequences in batch order: one row for kLast,
  // tokens.size() rows for kAll, none for kNone.
  std::vector<float> logits;
  std::vector<int64_t> first_row;  // per sequence: its first logits row, or -1
  int64_t vocab_size = 0;

  std::span<const float> row(int64_t r) const {
    return {logits.data() + r * vocab_size, static_cast<size_t>(vocab_size)};
  }
};

// The KV layout a model needs, for a given block size.
KvLayout KvLayoutFor(const model::ModelConfig& config, int64_t block_size);

class ModelRunner {
 public:
  // `model`, `pool` and `threads` must outlive the runner. The pool's layout must match
  // the model's (KvLayoutFor).
  ModelRunner(const model::Model& model, KvPool* pool, ThreadPool* threads);

  // InvalidArgument for a token id outside the vocabulary, a position past the context,
  // a block table too short or naming a page outside the pool.
  absl::Status Forward(std::span<const SequenceInput> batch, ForwardOutput* out);

  const model::ModelConfig& config() const { return config_; }

  // Called on the forward's thread as soon as layer `layer`'s K/V for every token of the
  // batch is in its pages, before the next layer runs; a layer-wise push starts sending
  // them from here while the rest of the forward computes. It may read those pages, but
  // must not write any page or block for long: the forward waits for it.
  using LayerKvHook = std::function<void(int64_t layer, std::span<const SequenceInput> batch)>;
  void set_layer_kv_hook(LayerKvHook hook) { layer_kv_hook_ = std::move(hook); }

 private:
  absl::Status Validate(std::span<const SequenceInput> batch) const;
  void Rope(int64_t num_tokens);
  void Attention(int64_t layer);  // RoPE, K/V into pages, attention: q_ -> attn_

  const model::Model& model_;
  const model::ModelConfig& config_;
  KvPool* pool_;
  ThreadPool* threads_;
  std::vector<double> inv_freq_;  // head_dim/2 rotary frequencies, scaling applied
  LayerKvHook layer_kv_hook_;

  // Scratch, grown to the largest batch seen; one engine thread owns the runner.
  std::vector<int64_t> positions_;
  std::vector<float> x_, h_, q_, k_, v_, attn_, gate_, up_, cos_, sin_;
  std::vector<int64_t> attn_cuts_;  // Attention(): the items each thread runs
  std::vector<const SequenceInput*> token_seq_;
};

}  // namespace baton::engine
