#include "engine/loaded_model.h"

#include <algorithm>
#include <filesystem>

#include "common/status.h"
#include "common/strings.h"

namespace baton::engine {

absl::StatusOr<LoadedModel> LoadModel(const std::string& path, const model::OpenOptions& options,
                                      const model::RankPlacement& placement) {
  LoadedModel loaded;
  BATON_ASSIGN_OR_RETURN(loaded.model, model::OpenShard(path, placement, options));
  BATON_ASSIGN_OR_RETURN(loaded.tokenizer, tokenizer::LoadTokenizerFiles(path));
  const model::ModelConfig& config = loaded.model->config();
  // Models pad their embedding past the tokenizer's vocabulary (for alignment), never the
  // other way round: a tokenizer id past the embedding would read outside the weights.
  if (loaded.tokenizer.tokenizer->vocab_size() > config.vocab_size) {
    return absl::InvalidArgumentError(
        StrCat("the tokenizer at ", path, " has ", loaded.tokenizer.tokenizer->vocab_size(),
               " tokens but the model's vocab_size is ", config.vocab_size,
               "; the tokenizer does not belong to these weights"));
  }
  auto add = [&](int32_t id) {
    if (id >= 0 && id < config.vocab_size &&
        std::find(loaded.eos_token_ids.begin(), loaded.eos_token_ids.end(), id) ==
            loaded.eos_token_ids.end()) {
      loaded.eos_token_ids.push_back(id);
    }
  };
  for (int32_t id : config.eos_token_ids) add(id);
  for (int32_t id : loaded.model->generation_defaults().eos_token_ids) add(id);
  add(loaded.tokenizer.tokenizer->eos_id());
  loaded.name = config.name;
  if (loaded.name.empty()) {
    std::filesystem::path p(path);
    loaded.name = (std::filesystem::is_directory(p) ? p.filename() : p.stem()).string();
    if (loaded.name.empty()) loaded.name = p.parent_path().filename().string();
  }
  return loaded;
}

}  // namespace baton::engine
