#include "capacity/capacity_plan.h"

#include <cmath>

#include "capacity/tp_split.h"
#include "common/status.h"
#include "common/strings.h"

namespace baton::capacity {
namespace {

constexpr double kGB = 1e9;

double Share(const TensorGroup& g, int64_t part, int64_t whole) {
  return static_cast<double>(g.bytes) * static_cast<double>(part) / static_cast<double>(whole);
}

double ElementShare(const TensorGroup& g, int64_t part, int64_t whole) {
  return static_cast<double>(g.elements) * static_cast<double>(part) / static_cast<double>(whole);
}

absl::Status CheckRequest(const ModelShape& shape, const DeviceSpec& device,
                          const PlanRequest& request) {
  if (request.tp < 1) {
    return absl::InvalidArgumentError(StrCat("--tp ", request.tp, " must be at least 1"));
  }
  if (!(request.kv_element_bytes > 0)) {
    return absl::InvalidArgumentError("--kv-dtype must name a type of at least one byte");
  }
  if (!(request.memory_utilization > 0 && request.memory_utilization <= 1)) {
    return absl::InvalidArgumentError(StrCat("--gpu-memory-utilization ",
                                             request.memory_utilization,
                                             " must be in (0, 1]; vLLM's default is 0.9"));
  }
  if (request.max_model_len < 1 || request.max_model_len > shape.context) {
    return absl::InvalidArgumentError(StrCat("--max-model-len ", request.max_model_len,
                                             " must be between 1 and the model's ", shape.context,
                                             "-token context"));
  }
  if (request.prompt_len < 1 || request.prompt_len > request.max_model_len) {
    return absl::InvalidArgumentError(StrCat("--prompt-len ", request.prompt_len,
                                             " must be between 1 and --max-model-len ",
                                             request.max_model_len));
  }
  if (!(device.memory_bytes > 0) || !(device.bandwidth_bytes_s > 0) || !(device.flops > 0)) {
    return absl::InvalidArgumentError(StrCat("device '", device.name,
                                             "' needs positive memory (--memory-gb), bandwidth ",
                                             "(--bandwidth-gbs) and compute (--tflops)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<double> KvElementBytes(const std::string& dtype) {
  if (dtype == "bf16" || dtype == "f16") return 2.0;
  if (dtype == "f32") return 4.0;
  if (dtype == "fp8") return 1.0;
  return absl::InvalidArgumentError(
      StrCat("--kv-dtype '", dtype, "' is not one of bf16, f16, f32, fp8"));
}

absl::StatusOr<CapacityPlan> PlanCapacity(const ModelShape& shape, const WeightInventory& weights,
                                          const DeviceSpec& device, const PlanRequest& request) {
  BATON_RETURN_IF_ERROR(CheckRequest(shape, device, request));
  // The engine's own rule for which heads, MLP columns and vocabulary rows a rank holds;
  // its message names --tensor-parallel-size, which `baton plan` accepts as --tp.
  BATON_ASSIGN_OR_RETURN(TpSplit shard, SplitForTp(shape, request.tp));
  const int64_t tp = request.tp;
  const int64_t layers = shape.layers, head_dim = shape.head_dim;
  const auto ctx = static_cast<double>(request.prompt_len);

  CapacityPlan p;
  p.tp = request.tp;
  p.heads_per_rank = shard.heads;
  p.kv_heads_per_rank = shard.kv_heads;
  p.kv_bytes_per_token_rank =
      2.0 * static_cast<double>(layers * shard.kv_heads * head_dim) * request.kv_element_bytes;
  p.kv_bytes_per_token_total = p.kv_bytes_per_token_rank * static_cast<double>(tp);

  // Rank 0 holds the most: a whole ceil(vocab / tp) slice of the embedding and LM head.
  const double layer_bytes = Share(weights.attn_q_o, shard.heads, shape.heads) +
                             Share(weights.attn_k_v, shard.kv_heads, shape.kv_heads) +
                             Share(weights.mlp, shard.intermediate, shape.intermediate);
  const double embedding_bytes = Share(weights.embedding, shard.vocab_shard, shape.vocab);
  const double head_bytes = Share(weights.lm_head, shard.vocab_shard, shape.vocab);
  p.weight_bytes_rank =
      layer_bytes + embedding_bytes + head_bytes + static_cast<double>(weights.other_bytes);
  p.weight_bytes_total = static_cast<double>(weights.attn_q_o.bytes + weights.mlp.bytes +
                                             weights.embedding.bytes + weights.lm_head.bytes) +
                         Share(weights.attn_k_v, shard.kv_heads * tp, shape.kv_heads) +
                         static_cast<double>(weights.other_bytes) * static_cast<double>(tp);

  p.usable_bytes_rank = device.memory_bytes * request.memory_utilization;
  if (p.weight_bytes_rank >= p.usable_bytes_rank) {
    return absl::InvalidArgumentError(StrCat(
        "the weights need ", p.weight_bytes_rank / kGB, " GB per rank but only ",
        p.usable_bytes_rank / kGB, " GB are usable (", device.name,
        ": --memory-gb x --gpu-memory-utilization), leaving nothing for the KV cache; raise --tp "
        "or the memory"));
  }
  p.kv_cache_bytes_rank = p.usable_bytes_rank - p.weight_bytes_rank;
  p.tokens_fit =
      static_cast<int64_t>(std::floor(p.kv_cache_bytes_rank / p.kv_bytes_per_token_rank));
  p.conversations_fit = p.tokens_fit / request.max_model_len;
  p.memory_batch_limit = p.tokens_fit / request.prompt_len;

  // One decode step reads every layer matrix and the LM head once (a tied head is the
  // embedding), whatever the batch, and each sequence's KV cache.
  const TensorGroup& head = weights.tied ? weights.embedding : weights.lm_head;
  const double step_weight_bytes = layer_bytes + Share(head, shard.vocab_shard, shape.vocab);
  const double matrix_elements = ElementShare(weights.attn_q_o, shard.heads, shape.heads) +
                                 ElementShare(weights.attn_k_v, shard.kv_heads, shape.kv_heads) +
                                 ElementShare(weights.mlp, shard.intermediate, shape.intermediate);
  const double head_elements = ElementShare(head, shard.vocab_shard, shape.vocab);
  // QK^T and PV: 2 FLOPs per multiply-add, head_dim each, per query head and position.
  const double attention_flops_per_pos = 4.0 * static_cast<double>(layers * shard.heads * head_dim);
  const double kv_seq_bytes = ctx * p.kv_bytes_per_token_rank;
  p.decode_step_bytes_rank = step_weight_bytes + kv_seq_bytes;
  p.decode_flops_rank = 2.0 * (matrix_elements + head_elements) + attention_flops_per_pos * ctx;
  p.decode_floor_seconds = std::max(p.decode_step_bytes_rank / device.bandwidth_bytes_s,
                                    p.decode_flops_rank / device.flops);

  // Prefill: every prompt token through the layer matrices, causal attention over the
  // prompt (ctx (ctx + 1) / 2 pairs), the LM head for the last token only.
  p.prefill_flops_rank = 2.0 * matrix_elements * ctx + 2.0 * head_elements +
                         attention_flops_per_pos * ctx * (ctx + 1) / 2;
  const double prefill_compute = p.prefill_flops_rank / device.flops;
  const double prefill_memory = (step_weight_bytes + kv_seq_bytes) / device.bandwidth_bytes_s;
  p.prefill_compute_bound = prefill_compute >= prefill_memory;
  p.prefill_seconds = std::max(prefill_compute, prefill_memory);

  // B x f / F = (W + B x kv) / BW  =>  B = (W / BW) / (f / F - kv / BW).
  const double per_seq =
      p.decode_flops_rank / device.flops - kv_seq_bytes / device.bandwidth_bytes_s;
  if (per_seq > 0) p.compute_bound_batch = step_weight_bytes / device.bandwidth_bytes_s / per_seq;
  return p;
}

}  // namespace baton::capacity
