#include "tools/bench_serve_dataset.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <span>

#include "absl/container/flat_hash_set.h"
#include "common/status.h"
#include "common/strings.h"

namespace baton::tools {
namespace {

using tokenizer::TokenId;
using tokenizer::Tokenizer;

// Short, common words: most BPE vocabularies hold " word" as one token, which keeps
// word counts close to token counts when there is no tokenizer to count with.
constexpr const char* kWords[] = {
    "the",   "of",    "and",   "to",    "in",    "is",    "was",   "for",    "on",    "that",
    "with",  "as",    "by",    "at",    "from",  "his",   "her",   "they",   "this",  "an",
    "be",    "are",   "or",    "it",    "which", "one",   "new",   "first",  "time",  "year",
    "not",   "but",   "had",   "have",  "has",   "were",  "he",    "she",    "all",   "also",
    "after", "two",   "more",  "other", "some",  "when",  "into",  "would",  "their", "can",
    "city",  "world", "water", "house", "light", "river", "music", "school", "story", "game",
    "small", "large", "old",   "long",  "good",  "great", "high",  "part",   "place", "day",
    "work",  "life",  "name",  "home",  "land",  "power", "book",  "team",   "war",   "way",
    "state", "group", "line",  "field", "south", "north", "west",  "east",   "king",  "film"};

// Caps on the search for a round-trip-stable prompt; past them the ids are still exact
// and only the text's re-tokenized length may differ by a token or two.
constexpr int kMaxResamples = 8;
constexpr int kMaxFixups = 8;

int64_t SampleLength(std::mt19937_64& rng, int64_t len, double ratio, int64_t min_len) {
  auto [low, high] = LengthBounds(len, ratio, min_len);
  return std::uniform_int_distribution<int64_t>(low, high)(rng);
}

// Makes prompts of exact token counts from a tokenizer's ordinary vocabulary.
class TokenPromptMaker {
 public:
  static absl::StatusOr<TokenPromptMaker> Create(const Tokenizer* tok) {
    absl::flat_hash_set<TokenId> added;
    for (const auto& t : tok->vocab().added_tokens) added.insert(t.id);
    std::vector<TokenId> ids;
    for (TokenId id = 0; id < tok->vocab_size(); ++id) {
      const auto type = tok->vocab().types[id];
      if (type != tokenizer::TokenType::kNormal && type != tokenizer::TokenType::kUndefined) {
        continue;
      }
      if (tok->IsSpecial(id) || added.contains(id) || tok->TokenBytes(id).empty()) continue;
      ids.push_back(id);
    }
    if (ids.empty()) {
      return absl::InvalidArgumentError(
          StrCat("--tokenizer ", tok->vocab().source, " has no ordinary tokens to sample"));
    }
    return TokenPromptMaker(tok, std::move(ids));
  }

  // `prefix` followed by `suffix_len` random tokens. Searches for ids whose decoded text
  // encodes back to the same ids, so that text and ids are the same prompt to a server
  // that tokenizes alike; the prefix's ids are kept as they are.
  absl::StatusOr<BenchPrompt> Make(std::span<const TokenId> prefix, int64_t suffix_len,
                                   std::mt19937_64& rng) const {
    const size_t target = prefix.size() + static_cast<size_t>(suffix_len);
    std::vector<TokenId> ids;
    for (int attempt = 0; attempt < kMaxResamples; ++attempt) {
      ids.assign(prefix.begin(), prefix.end());
      AppendRandom(target - ids.size(), rng, &ids);
      for (int fixup = 0; fixup < kMaxFixups; ++fixup) {
        BATON_ASSIGN_OR_RETURN(std::string text, tok_->Decode(ids));
        BATON_ASSIGN_OR_RETURN(std::vector<TokenId> again,
                               tok_->Encode(text, {.add_special_tokens = false}));
        if (again == ids) {
          return BenchPrompt{.text = std::move(text),
                             .token_ids = std::move(ids),
                             .prompt_len = static_cast<int64_t>(target),
                             .text_is_exact = true};
        }
        // Suffix tokens that merged into the prefix would unshare it: draw a new suffix.
        if (again.size() < prefix.size() ||
            !std::equal(prefix.begin(), prefix.end(), again.begin())) {
          break;
        }
        again.resize(std::min(again.size(), target));
        AppendRandom(target - again.size(), rng, &again);
        ids = std::move(again);
      }
    }
    ids.assign(prefix.begin(), prefix.end());
    AppendRandom(target - ids.size(), rng, &ids);
    BATON_ASSIGN_OR_RETURN(std::string text, tok_->Decode(ids));
    return BenchPrompt{.text = std::move(text),
                       .token_ids = std::move(ids),
                       .prompt_len = static_cast<int64_t>(target),
                       .text_is_exact = false};
  }

 private:
  TokenPromptMaker(const Tokenizer* tok, std::vector<TokenId> ids)
      : tok_(tok), sampleable_(std::move(ids)) {}

  void AppendRandom(size_t n, std::mt19937_64& rng, std::vector<TokenId>* out) const {
    std::uniform_int_distribution<size_t> pick(0, sampleable_.size() - 1);
    for (size_t i = 0; i < n; ++i) out->push_back(sampleable_[pick(rng)]);
  }

  const Tokenizer* tok_;
  std::vector<TokenId> sampleable_;
};

std::string RandomWords(int64_t n, std::mt19937_64& rng) {
  std::uniform_int_distribution<size_t> pick(0, std::size(kWords) - 1);
  std::string out;
  for (int64_t i = 0; i < n; ++i) {
    if (i > 0) out.push_back(' ');
    out.append(kWords[pick(rng)]);
  }
  return out;
}

absl::Status Validate(const DatasetOptions& o) {
  if (o.num_prompts < 1) {
    return absl::InvalidArgumentError(
        StrCat("--num-prompts must be at least 1, not ", o.num_prompts));
  }
  if (!(o.range_ratio >= 0.0 && o.range_ratio < 1.0)) {
    return absl::InvalidArgumentError(
        StrCat("--random-range-ratio must be in [0, 1), not ", o.range_ratio));
  }
  const int64_t min_input = o.kind == DatasetKind::kRandom ? 1 : 0;
  if (o.input_len < min_input) {
    return absl::InvalidArgumentError(
        StrCat("--random-input-len must be at least ", min_input, ", not ", o.input_len));
  }
  if (o.output_len < 1) {
    return absl::InvalidArgumentError(
        StrCat("--random-output-len must be at least 1, not ", o.output_len));
  }
  // A bound on what a benchmark can ask for keeps a typo from allocating gigabytes.
  constexpr int64_t kMaxLen = int64_t{1} << 24;
  if (o.input_len > kMaxLen || o.output_len > kMaxLen || o.prefix_len > kMaxLen) {
    return absl::InvalidArgumentError(StrCat("lengths are limited to ", kMaxLen, " tokens"));
  }
  if (o.kind == DatasetKind::kPrefix) {
    if (o.num_prefixes < 1) {
      return absl::InvalidArgumentError(
          StrCat("--num-prefixes must be at least 1, not ", o.num_prefixes));
    }
    if (o.prefix_len < 1) {
      return absl::InvalidArgumentError(
          StrCat("--prefix-len must be at least 1, not ", o.prefix_len));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::pair<int64_t, int64_t> LengthBounds(int64_t len, double range_ratio, int64_t min_len) {
  const auto low = static_cast<int64_t>(std::floor(static_cast<double>(len) * (1 - range_ratio)));
  const auto high = static_cast<int64_t>(std::ceil(static_cast<double>(len) * (1 + range_ratio)));
  return {std::max(low, min_len), std::max(high, min_len)};
}

absl::StatusOr<std::vector<BenchPrompt>> MakeDataset(const DatasetOptions& options,
                                                     const Tokenizer* tokenizer) {
  BATON_RETURN_IF_ERROR(Validate(options));
  std::mt19937_64 rng(options.seed);
  std::optional<TokenPromptMaker> maker;
  if (tokenizer != nullptr) {
    BATON_ASSIGN_OR_RETURN(TokenPromptMaker made, TokenPromptMaker::Create(tokenizer));
    maker.emplace(std::move(made));
  }
  const bool prefixed = options.kind == DatasetKind::kPrefix;
  const int64_t min_input = prefixed ? 0 : 1;

  struct Prefix {
    std::string text;
    std::vector<TokenId> ids;
  };
  std::vector<Prefix> prefixes;
  if (prefixed) {
    for (int64_t g = 0; g < options.num_prefixes; ++g) {
      if (maker) {
        BATON_ASSIGN_OR_RETURN(BenchPrompt p, maker->Make({}, options.prefix_len, rng));
        prefixes.push_back({std::move(p.text), std::move(p.token_ids)});
      } else {
        prefixes.push_back({RandomWords(options.prefix_len, rng), {}});
      }
    }
  }

  std::vector<BenchPrompt> prompts;
  prompts.reserve(static_cast<size_t>(options.num_prompts));
  for (int64_t i = 0; i < options.num_prompts; ++i) {
    const int64_t input_len = SampleLength(rng, options.input_len, options.range_ratio, min_input);
    const int64_t output_len = SampleLength(rng, options.output_len, options.range_ratio, 1);
    const int64_t group = prefixed ? i % options.num_prefixes : -1;
    BenchPrompt prompt;
    if (maker) {
      std::span<const TokenId> prefix;
      if (prefixed) prefix = prefixes[group].ids;
      BATON_ASSIGN_OR_RETURN(prompt, maker->Make(prefix, input_len, rng));
    } else {
      std::string suffix = RandomWords(input_len, rng);
      prompt.prompt_len = input_len;
      if (prefixed) {
        prompt.text = prefixes[group].text;
        prompt.prompt_len += options.prefix_len;
        if (!suffix.empty()) prompt.text.append(" ").append(suffix);
      } else {
        prompt.text = std::move(suffix);
      }
    }
    prompt.output_len = output_len;
    prompt.prefix_group = group;
    prompts.push_back(std::move(prompt));
  }
  // Interleave the groups, as vLLM's prefix-repetition dataset does, so that consecutive
  // requests do not all hit the same prefix.
  if (prefixed) std::shuffle(prompts.begin(), prompts.end(), rng);
  return prompts;
}

}  // namespace baton::tools
