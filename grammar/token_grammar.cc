#include "grammar/token_grammar.h"

#include "absl/status/status.h"

namespace baton::grammar {

absl::StatusOr<std::shared_ptr<const TokenGrammar>> TokenGrammar::Create(
    std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocab> vocab,
    const TokenGrammarOptions& options) {
  if (grammar == nullptr || vocab == nullptr) {
    return absl::InvalidArgumentError("TokenGrammar: null grammar or vocabulary");
  }
  return std::shared_ptr<const TokenGrammar>(
      new TokenGrammar(std::move(grammar), std::move(vocab), options));
}

std::shared_ptr<const PositionTable> TokenGrammar::Table(int32_t pos) const {
  {
    absl::MutexLock lock(&mu_);
    if (auto it = tables_.find(pos); it != tables_.end()) return it->second;
  }
  // Built outside the lock (milliseconds for a string position over a large vocabulary);
  // two threads may build the same table, and the first one stored wins.
  auto table = BuildPositionTable(*grammar_, *vocab_, pos);
  absl::MutexLock lock(&mu_);
  ++tables_built_;
  if (auto it = tables_.find(pos); it != tables_.end()) return it->second;
  if (table_bytes_ + table->bytes() > options_.table_cache_bytes) {
    tables_.clear();
    table_bytes_ = 0;
  }
  table_bytes_ += table->bytes();
  tables_.emplace(pos, table);
  return table;
}

size_t TokenGrammar::tables_built() const {
  absl::MutexLock lock(&mu_);
  return tables_built_;
}

size_t TokenGrammar::table_bytes() const {
  absl::MutexLock lock(&mu_);
  return table_bytes_;
}

void TokenGrammar::BuildAllTables() const {
  for (int32_t pos = 0; pos < grammar_->num_positions(); ++pos) {
    if (grammar_->element(pos).kind == Grammar::Kind::kBytes) (void)Table(pos);
  }
}

}  // namespace baton::grammar
