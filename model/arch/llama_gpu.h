// The Llama-family decoder on a GPU: one rank's part of the forward over a ragged batch,
// with paged KV in device memory, through kernels::GpuOps (the CUDA kernels and cuBLASLt,
// or the host emulation in tests). The CPU's counterpart is model/arch/llama.h; both
// take the same batch (model/forward_batch.h), the same shard (model/shard.h) and the
// same page layout (kvcache/page_layout.h), so one engine drives either.
//
// One step: the batch is packed on the host (model/arch/gpu_step.h) and copied in one
// piece; then the embedding gather, and per layer RMSNorm (fused with the residual add)
// -> QKV in one GEMM (+ bias) -> RoPE from a table -> the paged KV write -> decode
// attention for one-token sequences and prefill attention for chunks -> o_proj -> the
// tensor-parallel sum -> RMSNorm -> gate and up in one GEMM -> SwiGLU -> down_proj -> the
// sum; the rows that want logits go through the final norm and the LM head, and come
// back to the host in f32. Activations are f32 and the GEMM inputs bf16 (vLLM's and
// TensorRT-LLM's choice), so logits differ from the CPU's, which keeps f32 activations,
// within the tolerance the tests state.
//
// Decode-only steps of up to max_graph_batch sequences replay a CUDA graph captured per
// (batch bucket, context bucket) on first use; `use_graphs` false runs every step eagerly.
// A graph's step runs the same kernels with the same per-sequence work split as the
// eager step, so its logits are the same bits.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/gpu_ops.h"
#include "model/arch/gpu_step.h"
#include "model/forward_batch.h"
#include "model/kv_pages.h"
#include "model/model.h"
#include "model/shard.h"
#include "parallel/communicator.h"

namespace baton::model {

struct LlamaGpuOptions {
  int64_t max_tokens = 2048;  // tokens per step (the engine's max_batched_tokens)
  int64_t max_seqs = 256;     // sequences per step
  bool use_graphs = true;
  int max_graph_batch = kMaxGraphBatch;
  // Decode attention's scratch is cut to this many bytes: a step whose sequences need
  // more runs the kernel on a few sequences at a time (each sequence's work is the same).
  int64_t decode_workspace_bytes = int64_t{64} << 20;
  // Called while the weights upload, with bytes done and the total.
  std::function<void(uint64_t done, uint64_t total)> progress;
};

// Device copies of one rank's weights, in bf16 (f32, f16 and Q8_0 matrices are converted
// at upload; docs/gpu.md says why), with Q/K/V and gate/up each fused into one matrix.
struct LlamaGpuWeights {
  struct Layer {
    kernels::GpuBuffer attn_norm, mlp_norm;  // f32
    kernels::GpuBuffer qkv, o, gate_up, down;
    kernels::GpuBuffer qkv_bias, o_bias, gate_up_bias, down_bias;  // f32, or empty
  };
  // bf16 [vocab_shard][hidden]: the shard's rows, then zero rows up to vocab_shard.
  kernels::GpuBuffer embedding;
  kernels::GpuBuffer lm_head;  // the same layout; empty when tied (the embedding serves)
  kernels::GpuBuffer final_norm;
  std::vector<Layer> layers;  // the stage's layers, from shard.layer_begin
  // RoPE angles of every position: [max_position_embeddings][head_dim / 2], as the CPU
  // forward computes them (double, then f32), so both rotate by the same values.
  kernels::GpuBuffer rope_cos, rope_sin;
  uint64_t bytes = 0;
};

absl::StatusOr<LlamaGpuWeights> UploadLlamaWeights(const Model& model, const Shard& shard,
                                                   kernels::GpuOps* ops,
                                                   const LlamaGpuOptions& options);

class LlamaGpuForward {
 public:
  // Uploads the weights and allocates the step's scratch. `model` holds at least
  // `shard`'s weights; `tp` is the stage's tensor-parallel group (null when tp_size is 1).
  // All must outlive the forward.
  static absl::StatusOr<std::unique_ptr<LlamaGpuForward>> Create(const Model& model,
                                                                 const Shard& shard,
                                                                 kernels::GpuOps* ops,
                                                                 parallel::Communicator* tp,
                                                                 const LlamaGpuOptions& options);
  // The KV pages the steps read and write: this rank's pages, in device memory that
  // outlives the forward. InvalidArgument when their strides are not the shard's.
  absl::Status BindKv(const KvPages& kv);
  ~LlamaGpuForward();

  // One step over a batch ValidateBatch accepted. The last stage writes the logits the
  // batch asks for to `out` (every tensor-parallel rank gets them all). InvalidArgument
  // when the batch exceeds max_tokens or max_seqs; FailedPrecondition before BindKv.
  absl::Status Forward(std::span<const SequenceInput> batch, ForwardOutput* out);

  const ModelConfig& config() const { return config_; }
  const LlamaGpuWeights& weights() const { return weights_; }
  // Graphs on or off from the next step (benchmarks compare the two).
  void set_use_graphs(bool on) { options_.use_graphs = on; }
  int64_t graphs_captured() const { return static_cast<int64_t>(graphs_.size()); }
  int64_t graph_replays() const { return graph_replays_; }

 private:
  LlamaGpuForward(const Model& model, const Shard& shard, kernels::GpuOps* ops,
                  parallel::Communicator* tp, const LlamaGpuOptions& options);
  absl::Status Allocate();
  // Enqueues the step's kernels for the plan whose packed lists are at meta_ (device).
  absl::Status Enqueue(const GpuStepPlan& plan);
  absl::Status DecodeAttention(const GpuStepPlan& plan, const kernels::GpuKvLayer& layer,
                               const float* q, float* out);
  absl::Status SumOverTp(float* data, int64_t n);
  // Final norm and LM head for logits rows [first, first + count) of the plan, into logits_.
  absl::Status LogitsPass(const GpuStepPlan& plan, int first, int count);
  // logits_'s first `count` rows to the host, the tensor-parallel slices gathered.
  absl::Status CopyLogits(int count, float* dst);
  // The step's results to `out`: greedy ids, and the rows the host needs.
  absl::Status CopyOut(const GpuStepPlan& plan, std::span<const SequenceInput> batch,
                       ForwardOutput* out);
  // The host's rows among device rows [first, first + count), the ones logits_ holds now.
  absl::Status CopyRows(std::span<const SequenceInput> batch,
                        const std::vector<int64_t>& device_row, ForwardOutput* out, int first,
                        int count);
  int64_t LogitRowsPerPass() const;
  kernels::GpuKvLayer KvLayer(int64_t stage_layer) const;
  const int32_t* Meta(int64_t offset) const { return meta_.as<int32_t>() + offset; }

  const ModelConfig& config_;
  Shard shard_;
  kernels::GpuOps* ops_;
  parallel::Communicator* tp_;
  KvPages kv_;
  LlamaGpuOptions options_;
  LlamaGpuWeights weights_;

  int64_t q_width_ = 0, kv_width_ = 0, qkv_width_ = 0, inter_ = 0;
  // Device scratch, sized for max_tokens rows.
  kernels::GpuBuffer meta_;  // the packed plan
  kernels::GpuBuffer x_, h_, qkv_, attn_, attn_bf16_, proj_, gate_up_, act_;
  kernels::GpuBuffer logit_x_, logit_h_, logits_, logits_gathered_, greedy_, decode_workspace_;
  int64_t meta_capacity_ = 0;    // int32 elements
  void* meta_host_ = nullptr;    // pinned staging of the packed plan
  std::vector<float> gathered_;  // host: the tensor-parallel ranks' logits
  std::vector<int32_t> greedy_host_;

  std::map<std::pair<int, int>, std::unique_ptr<kernels::GpuGraph>> graphs_;
  int64_t graph_replays_ = 0;
};

}  // namespace baton::model
