// The grammars of constrained requests (SamplingParams::constraint), compiled against the
// served tokenizer's vocabulary once and shared: requests with the same schema share one
// TokenGrammar, and with it its per-state mask cache (grammar/token_grammar.h), which is
// what makes the masks of later requests cheap.
//
// A grammar is returned with every position table built, as xgrammar's compile step does
// and vLLM waits for before it schedules a request: then no decode step of any request
// waits for a table (unless a schema's tables outgrow TokenGrammarOptions's
// table_cache_bytes, 256 MiB), and a step's mask costs tens of microseconds at most, the
// first request's included (docs/perf/structured_outputs.md). The first request of a
// schema pays for the tables (about 0.25 s for a nested schema over a 128k vocabulary) on
// the thread that submits it, never on the engine's.
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
#include "absl/synchronization/notification.h"
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

  // The grammar for `constraint`, its tables built; null for Kind::kNone. InvalidArgument
  // (naming the construct) for a schema outside the supported subset, which is not kept.
  // Thread-safe: callers with the same new schema wait for one build, the others do not
  // wait for it.
  absl::StatusOr<std::shared_ptr<const grammar::TokenGrammar>> Get(
      const OutputConstraint& constraint);

  // Compiles started so far (evicted grammars and refused schemas included).
  size_t compiles() const;

 private:
  struct Slot {
    absl::Notification ready;
    absl::StatusOr<std::shared_ptr<const grammar::TokenGrammar>> grammar;
  };
  absl::StatusOr<std::shared_ptr<const grammar::TokenVocab>> VocabLocked();
  absl::StatusOr<std::shared_ptr<const grammar::TokenGrammar>> Compile(
      const OutputConstraint& constraint, std::shared_ptr<const grammar::TokenVocab> vocab);

  std::shared_ptr<const tokenizer::Tokenizer> tokenizer_;
  size_t capacity_;
  mutable std::mutex mu_;
  std::shared_ptr<const grammar::TokenVocab> vocab_;  // built on first use
  size_t compiles_ = 0;
  // Most recently used first; the map points into the list.
  using Entry = std::pair<std::string, std::shared_ptr<Slot>>;
  std::list<Entry> lru_;
  absl::flat_hash_map<std::string, std::list<Entry>::iterator> index_;
};

}  // namespace baton::engine
