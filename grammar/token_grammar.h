// A Grammar bound to a vocabulary: the per-position token tables (token_table.h), built
// all at once by BuildAllTables or each on first use, and the per-state mask cache
// (mask_cache.h). Thread-safe and shared by
// every sequence that uses the same grammar on a worker; GrammarMatcher is the
// per-sequence part.
//
//   BATON_ASSIGN_OR_RETURN(auto bound, TokenGrammar::Create(grammar, vocab));
//   GrammarMatcher matcher(bound);
//   matcher.FillMask(mask);  // then sample among the set bits, then matcher.Accept(id)
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "grammar/grammar.h"
#include "grammar/mask_cache.h"
#include "grammar/token_table.h"
#include "grammar/token_vocab.h"

namespace baton::grammar {

struct TokenGrammarOptions {
  size_t mask_cache_bytes = 64 << 20;    // per-state masks
  size_t table_cache_bytes = 256 << 20;  // per-position tables; cleared when full
};

class TokenGrammar {
 public:
  // token_bytes[id]: the raw bytes token id contributes to text; special[id]: a control
  // token (never allowed by the grammar's mask; the caller handles end-of-sequence ids).
  static absl::StatusOr<std::shared_ptr<const TokenGrammar>> Create(
      std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocab> vocab,
      const TokenGrammarOptions& options = {});

  const Grammar& grammar() const { return *grammar_; }
  const TokenVocab& vocab() const { return *vocab_; }
  int32_t vocab_size() const { return vocab_->size(); }
  size_t mask_words() const { return (static_cast<size_t>(vocab_->size()) + 31) / 32; }

  // The table of a kBytes position, built now if it is not cached.
  std::shared_ptr<const PositionTable> Table(int32_t pos) const;
  // Builds the table of every kBytes position now, so that no step of a sequence waits
  // for one (engine/grammar_cache.h does it when it binds a schema; xgrammar's compile
  // step does the same work). Tables beyond table_cache_bytes are dropped and rebuilt
  // when needed.
  void BuildAllTables() const;
  const MaskCache& masks() const { return masks_; }
  size_t tables_built() const;
  size_t table_bytes() const;  // of the tables kept now

 private:
  TokenGrammar(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocab> vocab,
               const TokenGrammarOptions& options)
      : grammar_(std::move(grammar)),
        vocab_(std::move(vocab)),
        options_(options),
        masks_(options.mask_cache_bytes) {}

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const TokenVocab> vocab_;
  TokenGrammarOptions options_;
  MaskCache masks_;
  mutable absl::Mutex mu_;
  mutable absl::flat_hash_map<int32_t, std::shared_ptr<const PositionTable>> tables_
      ABSL_GUARDED_BY(mu_);
  mutable size_t table_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  mutable size_t tables_built_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace baton::grammar
