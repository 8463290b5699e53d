// A capacity plan as JSON: the fields `baton plan --json` prints and the router's
// /inspect/plan returns, written once so that the two agree.
#pragma once

#include "capacity/capacity_plan.h"
#include "capacity/model_shape.h"
#include "nlohmann/json.hpp"

namespace baton::capacity {

// layers, hidden_size, intermediate_size, heads, kv_heads, head_dim, vocab_size,
// context_length.
nlohmann::json ShapeJson(const ModelShape& shape);

// device {name, memory_bytes, bandwidth_gbs, tflops}, the request (tp, kv_element_bytes,
// gpu_memory_utilization, max_model_len, prompt_len) and every figure of the plan; byte
// figures that differ per rank as {per_rank, total}.
nlohmann::json PlanJson(const DeviceSpec& device, const PlanRequest& request,
                        const CapacityPlan& plan);

}  // namespace baton::capacity
