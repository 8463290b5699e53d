// A GGUF model from its bytes: metadata -> ModelConfig, tensors -> Weights pointing into
// the bytes. Takes bytes rather than a path so that fuzzers and tests drive it directly;
// Model::Open maps the file and calls this.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "model/weight_binding.h"

namespace baton::model {

// Reads tensor types f32, f16, bf16 and ggml's q4_0, q4_1, q5_0, q5_1, q8_0, q2_K, q3_K,
// q4_K, q5_K and q6_K (any mix of them, as llama-quantize writes Q4_K_M and the like); a tensor of
// another type is refused when it is bound, naming it and its type. `bytes` must outlive the
// result; `source` names the file in messages. GenerationDefaults get the config's
// end-of-generation ids.
absl::StatusOr<ModelParts> LoadGgufModel(std::string_view bytes, std::string_view source);

// The weight type of a ggml type id, or nullopt for one Baton does not read.
std::optional<cpu::DType> DTypeOfGgmlType(uint32_t ggml_type);

// "q4_K (12)" for a ggml type id; "type 99" for one this table does not know.
std::string GgmlTypeName(uint32_t type);

}  // namespace baton::model
