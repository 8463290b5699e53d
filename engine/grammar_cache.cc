#include "engine/grammar_cache.h"

#include <vector>

#include "common/status.h"
#include "grammar/json_schema.h"

namespace baton::engine {

GrammarCache::GrammarCache(std::shared_ptr<const tokenizer::Tokenizer> tokenizer, size_t capacity)
    : tokenizer_(std::move(tokenizer)), capacity_(capacity == 0 ? 1 : capacity) {}

absl::StatusOr<std::shared_ptr<const grammar::TokenVocab>> GrammarCache::VocabLocked() {
  if (vocab_ != nullptr) return vocab_;
  const int32_t n = tokenizer_->vocab_size();
  std::vector<std::string> bytes(static_cast<size_t>(n));
  std::vector<bool> special(static_cast<size_t>(n));
  for (int32_t id = 0; id < n; ++id) {
    bytes[id] = tokenizer_->TokenBytes(id);
    special[id] = tokenizer_->IsSpecial(id);
  }
  BATON_ASSIGN_OR_RETURN(vocab_, grammar::MakeTokenVocab(std::move(bytes), std::move(special)));
  return vocab_;
}

absl::StatusOr<std::shared_ptr<const grammar::TokenGrammar>> GrammarCache::Compile(
    const OutputConstraint& constraint, std::shared_ptr<const grammar::TokenVocab> vocab) {
  std::shared_ptr<const grammar::Grammar> compiled;
  if (constraint.kind == OutputConstraint::Kind::kJsonObject) {
    compiled = grammar::JsonObjectGrammar();
  } else {
    BATON_ASSIGN_OR_RETURN(compiled, grammar::CompileJsonSchema(constraint.json_schema));
  }
  BATON_ASSIGN_OR_RETURN(auto bound,
                         grammar::TokenGrammar::Create(std::move(compiled), std::move(vocab)));
  bound->BuildAllTables();
  return bound;
}

absl::StatusOr<std::shared_ptr<const grammar::TokenGrammar>> GrammarCache::Get(
    const OutputConstraint& constraint) {
  if (constraint.kind == OutputConstraint::Kind::kNone) return nullptr;
  const bool object = constraint.kind == OutputConstraint::Kind::kJsonObject;
  // The kind is part of the key: "o" alone is json_object, "s" + text a schema.
  std::string key = object ? "o" : "s" + constraint.json_schema;
  std::shared_ptr<Slot> slot;
  std::shared_ptr<const grammar::TokenVocab> vocab;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = index_.find(key); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      slot = it->second->second;
    } else {
      BATON_ASSIGN_OR_RETURN(vocab, VocabLocked());
      slot = std::make_shared<Slot>();
      lru_.emplace_front(key, slot);
      index_[key] = lru_.begin();
      ++compiles_;
    }
  }
  if (vocab == nullptr) {  // another caller builds it (or has)
    slot->ready.WaitForNotification();
    return slot->grammar;
  }
  // Outside the lock: building the tables takes a good part of a second on a large
  // vocabulary, and requests with other schemas must not wait for it.
  slot->grammar = Compile(constraint, std::move(vocab));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!slot->grammar.ok()) {
      // A schema that does not compile is not kept: a stream of bad schemas must not push
      // out the good ones (each costs a fraction of a second to build again), and
      // refusing one again costs only its compile.
      if (auto it = index_.find(key); it != index_.end() && it->second->second == slot) {
        lru_.erase(it->second);
        index_.erase(it);
      }
    }
    while (lru_.size() > capacity_) {
      index_.erase(lru_.back().first);
      lru_.pop_back();
    }
  }
  slot->ready.Notify();
  return slot->grammar;
}

size_t GrammarCache::compiles() const {
  std::lock_guard<std::mutex> lock(mu_);
  return compiles_;
}

}  // namespace baton::engine
