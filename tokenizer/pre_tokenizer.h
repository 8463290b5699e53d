// Pre-tokenization: splits normalized text into pieces that BPE encodes one at a time,
// as tokenizer.json's "pre_tokenizer" describes it, or as a GGUF's tokenizer.ggml.pre
// names it (a sequence of regex splits).
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"
#include "tokenizer/regex.h"

namespace baton::tokenizer {

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct PreTokenizerStep {
  enum class Kind { kSplit, kByteLevelPrefix, kMetaspace };
  Kind kind = Kind::kSplit;
  // kSplit: a literal or regex delimiter.
  std::shared_ptr<const Regex> regex;
  std::string literal;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  // kMetaspace
  std::string replacement = "\xE2\x96\x81";  // U+2581
  enum class Prepend { kAlways, kFirst, kNever } prepend = Prepend::kAlways;
  bool metaspace_split = true;
};

// Storage for pieces: views into the caller's text or into strings owned here.
struct PieceBuffer {
  std::vector<std::string_view> pieces;
  std::deque<std::string> owned;
  void Clear() {
    pieces.clear();
    owned.clear();
  }
};

class PreTokenizer {
 public:
  static absl::StatusOr<PreTokenizer> FromJson(const nlohmann::json& j);
  // A sequence of regexes applied one after the other, each isolating its matches (the
  // llama.cpp form of the GGUF pre-tokenizers).
  static absl::StatusOr<PreTokenizer> FromRegexSequence(const std::vector<std::string>& patterns);

  void Add(PreTokenizerStep step) { steps_.push_back(std::move(step)); }
  bool empty() const { return steps_.empty(); }

  // Splits `text` (valid UTF-8, outliving `out`) and appends the pieces to `out`.
  // `first_segment` is true for the segment that starts the input (Metaspace "first").
  void Run(std::string_view text, bool first_segment, PieceBuffer* out) const;

 private:
  std::vector<PreTokenizerStep> steps_;
};

// The GPT-2 split regex that ByteLevel(use_regex=true) applies.
extern const char kGpt2SplitRegex[];

}  // namespace baton::tokenizer
