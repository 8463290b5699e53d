// What a model's weights weigh, grouped as tensor parallelism splits them
// (capacity/tp_split.h): bytes from each tensor's shape and stored type, never its data.
// Model::Open records it (Model::weight_inventory), so a shard still knows its whole
// model's; `baton plan` and a worker's GetModelInfo report it.
#pragma once

#include <cstdint>

#include "capacity/capacity_plan.h"
#include "capacity/model_shape.h"
#include "model/model.h"
#include "model/model_config.h"

namespace baton::model {

// `weights` must hold every layer (not a pipeline stage's shard); `weight_bytes` counts
// every tensor once, matrices and vectors (Model::weight_bytes).
capacity::WeightInventory InventoryOf(const Weights& weights, uint64_t weight_bytes);

// The numbers of `config` that capacity planning reads.
capacity::ModelShape ShapeOf(const ModelConfig& config);

}  // namespace baton::model
