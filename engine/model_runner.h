// The CPU backend of one rank: the model's forward (model/arch/llama.h) over this
// process's KV pool and thread pool.
//
// One Forward call takes several sequences, each with some new tokens: a prefill chunk,
// or one decode token. Each sequence brings its block table; the runner writes the new
// tokens' K/V into those pages and attends over everything before them. Every per-token
// computation is independent of the rest of the batch (see kernels/cpu/matmul.h), so a
// sequence's logits are bit-identical whether it runs alone, chunked, or batched.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/thread_pool.h"
#include "engine/backend.h"
#include "kvcache/kv_pool.h"
#include "model/arch/llama.h"
#include "model/model.h"
#include "model/shard.h"

namespace baton::engine {

// The KV layout a model needs, for a given block size and element type ("bf16" or
// "f32": CheckKvCacheDtype): every layer and KV head, or those of one rank's shard.
kvcache::PageLayout PageLayoutFor(const model::ModelConfig& config, int64_t block_size,
                                  const std::string& dtype);
kvcache::PageLayout PageLayoutFor(const model::Shard& shard, const model::ModelConfig& config,
                                  int64_t block_size, const std::string& dtype);
// The pool as the forward addresses it.
model::KvPages KvPagesOf(kvcache::KvPool* pool);

class ModelRunner : public Backend {
 public:
  // `model`, `pool` and `threads` must outlive the runner. The pool's layout must match
  // the model's (PageLayoutFor).
  ModelRunner(const model::Model& model, kvcache::KvPool* pool, ThreadPool* threads);

  absl::Status Forward(std::span<const SequenceInput> batch, ForwardOutput* out) override;
  void set_layer_kv_hook(LayerKvHook hook) override { forward_.set_layer_kv_hook(std::move(hook)); }
  const char* name() const override { return "cpu"; }

  const model::ModelConfig& config() const { return forward_.config(); }

 private:
  kvcache::KvPool* pool_;
  model::LlamaForward forward_;
  std::vector<float> hidden_;
};

}  // namespace baton::engine
