// The prompts of a serving benchmark: how many tokens go in and how many should come
// out of each request, made reproducibly from a seed.
//
//   DatasetOptions options{.kind = DatasetKind::kRandom, .num_prompts = 100,
//                          .input_len = 512, .output_len = 128, .range_ratio = 0.1};
//   BATON_ASSIGN_OR_RETURN(std::vector<BenchPrompt> prompts,
//                          MakeDataset(options, tokenizer.get()));  // tokenizer may be null
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "tokenizer/tokenizer.h"

namespace baton::tools {

enum class DatasetKind {
  kRandom,  // independent random prompts
  kPrefix,  // groups of prompts that share a random prefix (exercises prefix caching)
};

struct DatasetOptions {
  DatasetKind kind = DatasetKind::kRandom;
  int64_t num_prompts = 1000;
  uint64_t seed = 0;
  // Random: the prompt length. Prefix: the length of the random suffix after the prefix.
  int64_t input_len = 1024;
  int64_t output_len = 128;
  // Lengths are drawn uniformly from [len*(1-r), len*(1+r)] (vLLM's --random-range-ratio).
  double range_ratio = 0.0;
  int64_t num_prefixes = 10;
  int64_t prefix_len = 256;
};

struct BenchPrompt {
  std::string text;
  // The prompt's token ids when a tokenizer made it; empty otherwise.
  std::vector<int32_t> token_ids;
  int64_t prompt_len = 0;  // tokens (words when there is no tokenizer)
  int64_t output_len = 0;  // sent as max_tokens
  // True when Encode(text) gives exactly token_ids, so a server that tokenizes the text
  // sees prompt_len tokens (before any BOS or chat template it adds).
  bool text_is_exact = false;
  int64_t prefix_group = -1;  // kPrefix: which shared prefix; -1 otherwise
};

// The inclusive integer range lengths are drawn from: [floor(len*(1-r)), ceil(len*(1+r))],
// clamped below at `min_len`.
std::pair<int64_t, int64_t> LengthBounds(int64_t len, double range_ratio, int64_t min_len);

// Checks the options (each message names the flag). `tokenizer` may be null: prompts are
// then random English words, about one token each.
absl::StatusOr<std::vector<BenchPrompt>> MakeDataset(const DatasetOptions& options,
                                                     const tokenizer::Tokenizer* tokenizer);

}  // namespace baton::tools
