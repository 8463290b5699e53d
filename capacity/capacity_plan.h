// The arithmetic of `baton plan` and the inspector's capacity panel: what a model costs on
// a device, from its shape, the bytes and element counts of its weights, and the device's
// memory, bandwidth and FLOP/s. No I/O, so tests check it against figures they derive
// themselves.
//
//   BATON_ASSIGN_OR_RETURN(CapacityPlan plan, PlanCapacity(shape, weights, device, request));
//   plan.decode_floor_seconds  // one token at batch 1, every byte read once at full bandwidth
//
// Formulas (docs/operations.md, "Capacity planning: baton plan"), per tensor-parallel rank:
//   KV bytes per token  = 2 (K and V) x layers x kv_heads_per_rank x head_dim x kv element bytes
//   KV memory           = memory x utilization - weights per rank
//   decode step bytes   = layer matrices + LM head (the embedding row is negligible)
//                         + context x KV bytes per token (per sequence)
//   decode FLOPs        = 2 x (layer matrix + LM head elements) + 4 x layers x heads x head_dim
//                         x context (QK^T and PV), per sequence
//   compute-bound batch = B where B x FLOPs / peak = (weights + B x KV bytes) / bandwidth
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "capacity/model_shape.h"

namespace baton::capacity {

// Bytes and elements of one group of weight tensors.
struct TensorGroup {
  uint64_t bytes = 0;
  uint64_t elements = 0;
};

// A model's weights, grouped by how tensor parallelism splits them (tp_split.h).
struct WeightInventory {
  TensorGroup attn_q_o;  // q_proj and o_proj of every layer: split by query heads
  TensorGroup attn_k_v;  // k_proj and v_proj: split by KV heads (replicated past them)
  TensorGroup mlp;       // gate, up, down: split by the intermediate width
  TensorGroup embedding;
  TensorGroup lm_head;       // empty when tied to the embedding
  uint64_t other_bytes = 0;  // norms, biases, RoPE factors: kept whole on every rank
  bool tied = false;         // the LM head is the embedding
};

struct DeviceSpec {
  std::string name;
  double memory_bytes = 0;       // per device (rank)
  double bandwidth_bytes_s = 0;  // per device
  double flops = 0;              // dense 16-bit FLOP/s per device
};

struct PlanRequest {
  int tp = 1;
  double kv_element_bytes = 2;
  double memory_utilization = 0.9;  // of memory_bytes, as vLLM's --gpu-memory-utilization
  int64_t max_model_len = 0;        // the length of one conversation
  int64_t prompt_len = 0;           // the prefill estimate's prompt, and decode's context
};

struct CapacityPlan {
  int tp = 1;
  int64_t kv_heads_per_rank = 0;
  int64_t heads_per_rank = 0;
  double kv_bytes_per_token_rank = 0;
  double kv_bytes_per_token_total = 0;  // every rank's share (more than the model's when
                                        // KV heads are replicated)
  double weight_bytes_rank = 0;
  double weight_bytes_total = 0;
  double usable_bytes_rank = 0;  // memory x utilization
  double kv_cache_bytes_rank = 0;
  int64_t tokens_fit = 0;         // KV slots; every rank holds a slice of each token
  int64_t conversations_fit = 0;  // of max_model_len tokens
  // Decode at batch 1 and a context of prompt_len tokens.
  double decode_step_bytes_rank = 0;
  double decode_flops_rank = 0;
  double decode_floor_seconds = 0;
  // Prefill of one prompt of prompt_len tokens: the larger of its FLOPs at peak and its
  // bytes (weights once, KV written) at full bandwidth.
  double prefill_flops_rank = 0;
  double prefill_seconds = 0;
  bool prefill_compute_bound = true;
  // Decode batch at which FLOPs time equals memory time, at a context of prompt_len;
  // nullopt when attention alone is memory-bound enough that no batch gets there.
  std::optional<double> compute_bound_batch;
  int64_t memory_batch_limit = 0;  // sequences of prompt_len tokens the KV cache holds
};

// Bytes per KV element of --kv-dtype: bf16, f16 (2), f32 (4), fp8 (1).
absl::StatusOr<double> KvElementBytes(const std::string& dtype);

// InvalidArgument, naming the flag, when the request does not fit the model or device:
// a tp that does not split the heads (tp_split.h), lengths out of range, or weights
// larger than the usable memory.
absl::StatusOr<CapacityPlan> PlanCapacity(const ModelShape& shape, const WeightInventory& weights,
                                          const DeviceSpec& device, const PlanRequest& request);

}  // namespace baton::capacity
