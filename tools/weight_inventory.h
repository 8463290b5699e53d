// What a loaded model's weights weigh, grouped as `baton plan` splits them across
// tensor-parallel ranks: bytes from each tensor's shape and stored type, never its data.
//
//   model::OpenOptions options;
//   options.prefault = false;  // maps the files without reading the weights
//   BATON_ASSIGN_OR_RETURN(auto model, model::Model::Open(path, options));
//   WeightInventory w = InventoryOf(*model);
#pragma once

#include "model/model.h"
#include "tools/capacity_plan.h"

namespace baton::tools {

// The model must hold every layer (not a pipeline stage's shard).
WeightInventory InventoryOf(const model::Model& model);

}  // namespace baton::tools
