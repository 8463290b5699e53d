// An opt-in scan of a loaded model's weights for NaN and Inf (`baton worker
// --check-weights`). Loading checks every shape and size, but not the values: a file
// whose weights were damaged (a bit flip in an exponent, a bad conversion) loads and then
// generates garbage, or NaN logits. This reads every weight once, so it costs about one
// pass over the model's bytes, which is why it is not done on every load.
//
//   BATON_ASSIGN_OR_RETURN(auto model, Model::Open(path));
//   BATON_RETURN_IF_ERROR(CheckWeightsFinite(*model));
#pragma once

#include "absl/status/status.h"
#include "model/model.h"
#include "model/weight_binding.h"

namespace baton::model {

// OK when every weight is finite. Otherwise InvalidArgument naming the first tensor (in
// the order embedding, layers 0.., final norm, LM head, RoPE factors) that holds a NaN or
// an Inf, with the element's index (and row and column for a matrix). Matrices are read in
// their stored type (f32, f16, bf16; for Q8_0 the f16 block scales, since the int8 values
// are always finite); vectors (norms, biases) were widened to f32 at load and keep any
// NaN or Inf. Names are the file's (`naming`). Unbound matrices (the layers another
// pipeline stage holds) are skipped, as is an LM head tied to the embedding.
absl::Status CheckWeightsFinite(const Weights& weights, TensorNaming naming);

// The same for a loaded model (or a rank's shard of one), naming its file in the message.
absl::Status CheckWeightsFinite(const Model& model);

}  // namespace baton::model
