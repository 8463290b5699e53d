// A Hugging Face model from the bytes of its directory's files: config.json,
// generation_config.json (optional), and model.safetensors or the shards that
// model.safetensors.index.json lists. Takes bytes rather than paths so that fuzzers and
// tests drive it directly; Model::Open reads and maps the files and calls this.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "model/weight_binding.h"

namespace baton::model {

struct HfModelBytes {
  std::string_view config_json;
  std::string_view generation_config_json;  // empty: there is none
  std::string_view index_json;              // empty: one model.safetensors
  // Safetensors files by plain file name: "model.safetensors", or every shard the index
  // names. The bytes must outlive the result.
  std::vector<std::pair<std::string, std::string_view>> files;
  std::string source;  // the directory, for messages; its last component names the model
};

absl::StatusOr<ModelParts> LoadHfModel(const HfModelBytes& in);

}  // namespace baton::model
