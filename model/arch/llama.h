// The Llama-family decoder (Llama 2/3, SmolLM, Qwen2 with q/k/v biases) on the CPU: one
// rank's part of the forward over a ragged batch with paged KV.
//
// One rank holds a Shard (model/shard.h): a run of layers (its pipeline stage) and, in
// each, a slice of the heads and of the MLP (its tensor-parallel slice). Forward runs
// those layers; `tp` sums the row-parallel outputs (o_proj, down_proj) and the
// vocabulary-parallel embedding across the tensor-parallel ranks, and gathers their
// slices of the logits. With one rank (Shard::whole) this is the plain forward.
//
// Every per-token computation is independent of the rest of the batch (see
// kernels/cpu/matmul.h), and the communicator sums in rank order, so within one
// placement a sequence's logits are bit-identical whether it runs alone, chunked, or
// batched.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "common/thread_pool.h"
#include "kernels/cpu/attention.h"
#include "model/forward_batch.h"
#include "model/kv_pages.h"
#include "model/model.h"
#include "model/shard.h"
#include "parallel/communicator.h"

namespace baton::model {

class LlamaForward {
 public:
  // `model` holds at least `shard`'s weights (a ShardModel, or the whole model); `tp` is
  // the stage's tensor-parallel group (null when tp_size is 1). All must outlive this.
  LlamaForward(const Model& model, const Shard& shard, ThreadPool* threads,
               parallel::Communicator* tp);

  // InvalidArgument for a token id outside the vocabulary, a position past the context,
  // a block table too short or naming a page outside `num_pages`.
  absl::Status Validate(std::span<const SequenceInput> batch, int64_t num_pages,
                        int64_t block_size) const;

  // Runs this stage's layers over the batch (already validated). `hidden` holds the
  // residual stream, one row of hidden_size floats per token of the batch: the first
  // stage fills it from the embedding, the others read it (from the previous stage),
  // and every stage leaves its output there. The last stage also writes the logits the
  // batch asks for to `out` (every tensor-parallel rank gets them all). A communicator
  // error is returned as it is: the group is broken.
  absl::Status Forward(std::span<const SequenceInput> batch, const KvPages& kv,
                       std::vector<float>* hidden, ForwardOutput* out);

  const Shard& shard() const { return shard_; }
  const ModelConfig& config() const { return config_; }

  // See engine/model_runner.h: called once a layer's K/V of the batch is in its pages.
  using LayerKvHook = std::function<void(int64_t layer, std::span<const SequenceInput> batch)>;
  void set_layer_kv_hook(LayerKvHook hook) { layer_kv_hook_ = std::move(hook); }

 private:
  void Rope(int64_t num_tokens);
  void Attention(int64_t layer, const KvPages& kv);  // RoPE, K/V into pages: q_ -> attn_
  absl::Status Embed(std::span<const SequenceInput> batch, float* x);
  absl::Status Logits(std::span<const SequenceInput> batch, const float* x, ForwardOutput* out);
  absl::Status SumOverTp(float* data, int64_t n);

  const Model& model_;
  const ModelConfig& config_;
  Shard shard_;
  ThreadPool* threads_;
  parallel::Communicator* tp_;
  std::vector<double> inv_freq_;  // head_dim/2 rotary frequencies, scaling applied
  LayerKvHook layer_kv_hook_;

  // Scratch, grown to the largest batch seen; one thread owns the forward.
  std::vector<int64_t> positions_;
  std::vector<float> h_, q_, k_, v_, attn_, gate_, up_, cos_, sin_, gathered_;
  std::vector<int64_t> attn_cuts_;  // Attention(): the items each thread runs
  std::vector<const SequenceInput*> token_seq_;
};

}  // namespace baton::model
