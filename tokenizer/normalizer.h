// Text normalization before pre-tokenization, as tokenizer.json's "normalizer"
// describes it (Sequence, Prepend, Replace, NFC/NFD/NFKC/NFKD, Lowercase, Strip).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"
#include "tokenizer/regex.h"

namespace baton::tokenizer {

struct NormalizerStep {
  enum class Kind { kPrepend, kReplace, kNfc, kNfd, kNfkc, kNfkd, kLowercase, kStrip };
  Kind kind = Kind::kPrepend;
  std::string text;                    // Prepend: prefix; Replace: literal pattern
  std::shared_ptr<const Regex> regex;  // Replace with a Regex pattern
  std::string content;                 // Replace: replacement
  bool strip_left = false, strip_right = false;
};

class Normalizer {
 public:
  // Parses tokenizer.json's "normalizer" value (null means none).
  static absl::StatusOr<Normalizer> FromJson(const nlohmann::json& j);

  bool empty() const { return steps_.empty(); }
  void Add(NormalizerStep step) { steps_.push_back(std::move(step)); }
  std::string Apply(std::string_view text) const;

 private:
  std::vector<NormalizerStep> steps_;
};

}  // namespace baton::tokenizer
