#include "engine/loaded_model.h"

#include <algorithm>
#include <filesystem>

#include "common/status.h"
#include "common/strings.h"

namespace baton::engine {

int64_t SampleableVocab(const LoadedModel& loaded) {
  const int64_t rows = loaded.model->config().vocab_size;
  if (loaded.tokenizer.tokenizer == nullptr) return rows;
  // A GGUF's vocabulary carries the padding as unused [PADn] tokens (llama.cpp's
  // converter writes them); a tokenizer.json's ends at its last token. Both end here.
  const tokenizer::Vocab& v = loaded.tokenizer.tokenizer->vocab();
  int64_t end = static_cast<int64_t>(v.tokens.size());
  while (end > 0 && static_cast<size_t>(end - 1) < v.types.size() &&
         v.types[static_cast<size_t>(end - 1)] == tokenizer::TokenType::kUnused) {
    --end;
  }
  return end == 0 ? rows : std::min(rows, end);
}

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
