// A context-free grammar over bytes, the form every constraint compiles to (json_schema.h)
// and the automaton the matcher runs (pda.h). Immutable once built, independent of any
// vocabulary, and shared by every TokenGrammar made from it.
//
// Layout: each rule has alternatives; each alternative is a run of elements in one flat
// array, ended by a kEnd element. A "position" is an index into that array: the matcher's
// stacks are stacks of positions, so a position is the whole of a parse state's local part.
//
//   GrammarBuilder b;
//   int32_t digit = b.AddRule("digit");
//   b.AddAlternative(digit, {GrammarBuilder::Bytes(ByteSet::Range('0', '9'))});
//   BATON_ASSIGN_OR_RETURN(auto g, std::move(b).Build(digit));
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "grammar/byte_set.h"

namespace baton::grammar {

class Grammar {
 public:
  enum class Kind : uint8_t { kEnd, kBytes, kRule };
  struct Element {
    ByteSet bytes;  // kBytes: the bytes this element consumes (one of them)
    Kind kind = Kind::kEnd;
    int32_t rule = -1;  // kRule: the rule referred to
  };

  int32_t root_rule() const { return root_; }
  int32_t num_rules() const { return static_cast<int32_t>(rule_alts_.size()); }
  int32_t num_positions() const { return static_cast<int32_t>(elements_.size()); }
  const Element& element(int32_t pos) const { return elements_[pos]; }
  // Start positions of the rule's alternatives.
  std::span<const int32_t> alternatives(int32_t rule) const { return rule_alts_[rule]; }
  // The rule whose alternative holds `pos`.
  int32_t rule_of(int32_t pos) const { return rule_of_[pos]; }
  // Where the rule can return to, anywhere in a document: the kBytes-or-kRule positions
  // right after a reference to it, following references that end their alternative up to
  // their callers. Lets the precomputation follow a token past the end of a rule without
  // knowing the real stack (token_table.h). returns_known is false when the set was too
  // large to keep (kMaxReturns); may_end_document when the rule can end the document.
  std::span<const int32_t> returns(int32_t rule) const { return returns_[rule]; }
  bool returns_known(int32_t rule) const { return returns_known_[rule]; }
  bool may_end_document(int32_t rule) const { return may_end_[rule]; }
  static constexpr size_t kMaxReturns = 512;
  const std::string& rule_name(int32_t rule) const { return names_[rule]; }
  // GBNF-like text, for tests and debugging.
  std::string ToString() const;

 private:
  friend class GrammarBuilder;
  Grammar() = default;
  int32_t root_ = 0;
  std::vector<Element> elements_;
  std::vector<std::vector<int32_t>> rule_alts_;
  std::vector<int32_t> rule_of_;
  std::vector<std::vector<int32_t>> returns_;
  std::vector<char> returns_known_;
  std::vector<char> may_end_;
  std::vector<std::string> names_;
};

class GrammarBuilder {
 public:
  using Symbol = Grammar::Element;
  static Symbol Bytes(ByteSet s) { return Symbol{s, Grammar::Kind::kBytes, -1}; }
  static Symbol Byte(uint8_t b) { return Bytes(ByteSet::Of(b)); }
  static Symbol Rule(int32_t r) { return Symbol{ByteSet{}, Grammar::Kind::kRule, r}; }
  // The bytes of `text`, one element each.
  static std::vector<Symbol> Literal(std::string_view text);

  int32_t AddRule(std::string name);
  void AddAlternative(int32_t rule, std::vector<Symbol> symbols);
  int32_t num_rules() const { return static_cast<int32_t>(rules_.size()); }

  // Drops alternatives that can never complete (an empty byte set, or a rule with no way
  // to finish), then checks that no rule can reach itself without consuming a byte (left
  // recursion would loop the matcher) and computes the return sites. InvalidArgument when the root
  // accepts nothing or when a rule is left-recursive.
  absl::StatusOr<std::shared_ptr<const Grammar>> Build(int32_t root) &&;

 private:
  std::vector<std::string> names_;
  std::vector<std::vector<std::vector<Symbol>>> rules_;
};

}  // namespace baton::grammar
