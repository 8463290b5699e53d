// A model ready to serve: weights (model/) plus the tokenizer and chat template
// (tokenizer/) found beside them, and the stop ids gathered from every place a release
// may put them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/model.h"
#include "model/shard.h"
#include "tokenizer/loader.h"

namespace baton::engine {

struct LoadedModel {
  std::unique_ptr<model::Model> model;
  tokenizer::TokenizerFiles tokenizer;
  // config.json's eos, generation_config.json's eos list and the tokenizer's eos, merged.
  std::vector<int32_t> eos_token_ids;
  std::string name;  // for listings: general.name, or the directory's name
};

// The ids a sampler may choose (SequenceSampler::set_vocab_limit): the model's rows, cut
// to the tokenizer's vocabulary where the embedding is padded past it (Qwen2.5's is).
int64_t SampleableVocab(const LoadedModel& loaded);

// `path`: a .gguf file, or a Hugging Face directory. Loads the weights (only `placement`'s
// shard of them for a rank of a worker group: model/shard.h), then the tokenizer from
// the same place, and checks that the two agree on the vocabulary.
absl::StatusOr<LoadedModel> LoadModel(const std::string& path,
                                      const model::OpenOptions& options = {},
                                      const model::RankPlacement& placement = {});

}  // namespace baton::engine
