// The grammars of constrained requests (SamplingParams::constraint), compiled against the
// served tokenizer's vocabulary once and shared: requests with the same schema share one
// TokenGrammar, and with it its per-state mask cache (grammar/token_grammar.h), which is
// what makes the masks of later requests cheap.
//
//   GrammarCache cache(tokenizer);
//   BATON_ASSIGN_OR_RETURN(auto grammar, cache.Get(params.constraint));  // null: none
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "engine/sampling_params.h"
#include "grammar/token_grammar.h"
#include "grammar/token_vocab.h"
#include "tokenizer/tokenizer.h"

namespace baton::engine {

class GrammarCache {
 public:
  // Keeps up to `capacity` compiled grammars, the least recently used going first.
  explicit GrammarCache(std::shared_ptr<const tokenizer::Tokenizer> tokenizer,
                        size_t capacity = 64);

  // The grammar for `constraint`; null for Kind::kNone. InvalidArgument (naming the
  // construct) for a schema outside the supported subset. Thread-safe.
  absl::StatusOr<std::shared_ptr<const grammar::TokenGrammar>> Get(
      const OutputConstraint& constraint);

 private:
  absl::StatusOr<std::shared_ptr<const grammar::TokenVocab>> VocabLocked();

  std::shared_ptr<const tokenizer::Tokenizer> tokenizer_;
  size_t capacity_;
  std::mutex mu_;
  std::shared_ptr<const grammar::TokenVocab> vocab_;  // built on first use
  // Most recently used first; the map points into the list.
  using Entry = std::pair<std::string, std::shared_ptr<const grammar::TokenGrammar>>;
  std::list<Entry> lru_;
  absl::flat_hash_map<std::string, std::list<Entry>::iterator> index_;
};

}  // namespace baton::engine
