#include "capacity/plan_json.h"

namespace baton::capacity {
namespace {

nlohmann::json PerRank(double rank, double total) { return {{"per_rank", rank}, {"total", total}}; }

}  // namespace

nlohmann::json ShapeJson(const ModelShape& s) {
  return {
      {"layers", s.layers},    {"hidden_size", s.hidden},    {"intermediate_size", s.intermediate},
      {"heads", s.heads},      {"kv_heads", s.kv_heads},     {"head_dim", s.head_dim},
      {"vocab_size", s.vocab}, {"context_length", s.context}};
}

nlohmann::json PlanJson(const DeviceSpec& device, const PlanRequest& req, const CapacityPlan& p) {
  const double tp = p.tp;
  nlohmann::json j;
  j["device"] = {{"name", device.name},
                 {"memory_bytes", device.memory_bytes},
                 {"bandwidth_gbs", device.bandwidth_bytes_s / 1e9},
                 {"tflops", device.flops / 1e12}};
  j["tp"] = p.tp;
  j["kv_element_bytes"] = req.kv_element_bytes;
  j["gpu_memory_utilization"] = req.memory_utilization;
  j["max_model_len"] = req.max_model_len;
  j["prompt_len"] = req.prompt_len;
  j["heads_per_rank"] = p.heads_per_rank;
  j["kv_heads_per_rank"] = p.kv_heads_per_rank;
  j["kv_bytes_per_token"] = PerRank(p.kv_bytes_per_token_rank, p.kv_bytes_per_token_total);
  j["weight_bytes"] = PerRank(p.weight_bytes_rank, p.weight_bytes_total);
  j["usable_bytes"] = PerRank(p.usable_bytes_rank, p.usable_bytes_rank * tp);
  j["kv_cache_bytes"] = PerRank(p.kv_cache_bytes_rank, p.kv_cache_bytes_rank * tp);
  j["tokens_fit"] = p.tokens_fit;
  j["conversations_fit"] = p.conversations_fit;
  j["decode"] = {{"context", req.prompt_len},
                 {"step_bytes_per_rank", p.decode_step_bytes_rank},
                 {"flops_per_rank", p.decode_flops_rank},
                 {"floor_seconds_per_token", p.decode_floor_seconds},
                 {"tokens_per_second", 1.0 / p.decode_floor_seconds}};
  j["prefill"] = {{"prompt_len", req.prompt_len},
                  {"flops_per_rank", p.prefill_flops_rank},
                  {"seconds", p.prefill_seconds},
                  {"bound", p.prefill_compute_bound ? "compute" : "memory"}};
  j["compute_bound_batch"] =
      p.compute_bound_batch ? nlohmann::json(*p.compute_bound_batch) : nlohmann::json(nullptr);
  j["memory_batch_limit"] = p.memory_batch_limit;
  return j;
}

}  // namespace baton::capacity
