#include "model/hf_loader.h"

#include <filesystem>
#include <map>

#include "common/status.h"
#include "common/strings.h"
#include "model/hf_config.h"
#include "model/safetensors.h"

namespace baton::model {
namespace {

TensorEntry EntryOf(const SafetensorsTensor& t, std::string_view file) {
  return TensorEntry{.dtype = t.dtype,
                     .type_name = SafetensorsDTypeName(t.dtype),
                     .shape = t.shape,
                     .data = t.data,
                     .file = file};
}

std::string ModelName(const std::string& dir) {
  std::filesystem::path p(dir);
  if (p.filename().empty()) p = p.parent_path();  // "models/x/"
  return p.filename().string();
}

}  // namespace

absl::StatusOr<ModelParts> LoadHfModel(const HfModelBytes& in) {
  ModelParts parts;
  const std::string config_source = baton::StrCat(in.source, "/config.json");
  BATON_ASSIGN_OR_RETURN(parts.config, ParseHfConfig(in.config_json, config_source));
  parts.config.name = ModelName(in.source);
  if (!in.generation_config_json.empty()) {
    BATON_ASSIGN_OR_RETURN(
        parts.generation,
        ParseGenerationConfig(in.generation_config_json,
                              baton::StrCat(in.source, "/generation_config.json")));
  }
  if (parts.generation.eos_token_ids.empty()) {
    parts.generation.eos_token_ids = parts.config.eos_token_ids;
  }
  for (int32_t id : parts.generation.eos_token_ids) {
    if (id >= parts.config.vocab_size) {
      return absl::InvalidArgumentError(
          baton::StrCat(in.source, "/generation_config.json: eos_token_id ", id,
                        " is outside the vocabulary (", parts.config.vocab_size, ")"));
    }
  }

  // Parse each file once. `paths` owns the text the entries' `file` views point at.
  std::map<std::string, SafetensorsFile> files;
  std::map<std::string, std::string> paths;
  for (const auto& [name, bytes] : in.files) {
    if (files.contains(name)) {
      return absl::InvalidArgumentError(
          baton::StrCat(in.source, ": file '", name, "' given twice"));
    }
    const std::string& path = paths[name] = baton::StrCat(in.source, "/", name);
    BATON_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::Parse(bytes, path));
    files.emplace(name, std::move(f));
  }

  TensorTable table;
  if (in.index_json.empty()) {
    auto it = files.find("model.safetensors");
    if (files.size() != 1 || it == files.end()) {
      return absl::InvalidArgumentError(baton::StrCat(
          in.source, ": expected one model.safetensors (or model.safetensors.index.json)"));
    }
    for (const SafetensorsTensor& t : it->second.tensors()) {
      table.emplace(t.name, EntryOf(t, paths[it->first]));
    }
  } else {
    const std::string index_source = baton::StrCat(in.source, "/model.safetensors.index.json");
    BATON_ASSIGN_OR_RETURN(SafetensorsIndex index,
                           ParseSafetensorsIndex(in.index_json, index_source));
    table.reserve(index.weight_map.size());
    for (const auto& [tensor, shard] : index.weight_map) {
      auto it = files.find(shard);
      if (it == files.end()) {
        return absl::InvalidArgumentError(baton::StrCat(
            index_source, ": shard '", shard, "' (holding '", tensor, "') was not loaded"));
      }
      const SafetensorsTensor* t = it->second.Find(tensor);
      if (t == nullptr) {
        return absl::InvalidArgumentError(baton::StrCat(index_source, ": weight_map puts '", tensor,
                                                        "' in '", shard,
                                                        "', which has no such tensor"));
      }
      table.emplace(tensor, EntryOf(*t, paths[it->first]));
    }
  }
  BATON_ASSIGN_OR_RETURN(parts.weights,
                         BindWeights(&parts.config, table, TensorNaming::kHf, &parts.weight_bytes));
  return parts;
}

}  // namespace baton::model
