#include "tokenizer/pre_tokenizer.h"

#include <algorithm>
#include <utility>

#include "common/status.h"
#include "common/strings.h"
#include "nlohmann/json.hpp"
#include "tokenizer/json_util.h"

namespace baton::tokenizer {

const char kGpt2SplitRegex[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {

absl::StatusOr<SplitBehavior> ParseBehavior(const nlohmann::json& j, std::string_view where) {
  const std::string b = j.contains("behavior") && j["behavior"].is_string()
                            ? j["behavior"].get<std::string>()
                            : "Isolated";
  if (b == "Removed") return SplitBehavior::kRemoved;
  if (b == "Isolated") return SplitBehavior::kIsolated;
  if (b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (b == "Contiguous") return SplitBehavior::kContiguous;
  return absl::InvalidArgumentError(baton::StrCat(where, ": unknown split behavior '", b, "'"));
}

absl::StatusOr<PreTokenizerStep> RegexStep(std::string_view pattern, SplitBehavior behavior,
                                           bool invert) {
  PreTokenizerStep s;
  s.kind = PreTokenizerStep::Kind::kSplit;
  BATON_ASSIGN_OR_RETURN(s.regex, Regex::Compile(pattern));
  s.behavior = behavior;
  s.invert = invert;
  return s;
}

absl::Status ParseStep(const nlohmann::json& j, PreTokenizer* out) {
  BATON_ASSIGN_OR_RETURN(std::string type, JsonString(j, "type", "pre_tokenizer"));
  if (type == "Sequence") {
    if (!j.contains("pretokenizers") || !j["pretokenizers"].is_array()) {
      return absl::InvalidArgumentError("pre_tokenizer Sequence: 'pretokenizers' must be an array");
    }
    for (const auto& sub : j["pretokenizers"]) BATON_RETURN_IF_ERROR(ParseStep(sub, out));
    return absl::OkStatus();
  }
  if (type == "Split") {
    PreTokenizerStep s;
    BATON_ASSIGN_OR_RETURN(Pattern p, ParsePattern(j, "pre_tokenizer Split"));
    s.regex = p.regex;
    s.literal = p.literal;
    BATON_ASSIGN_OR_RETURN(s.behavior, ParseBehavior(j, "pre_tokenizer Split"));
    s.invert = j.value("invert", false);
    out->Add(std::move(s));
    return absl::OkStatus();
  }
  if (type == "ByteLevel") {
    // Mapping bytes to the GPT-2 alphabet happens in the model; here only the prefix
    // space and the optional GPT-2 split remain.
    if (j.value("add_prefix_space", false)) {
      PreTokenizerStep s;
      s.kind = PreTokenizerStep::Kind::kByteLevelPrefix;
      out->Add(std::move(s));
    }
    if (j.value("use_regex", true)) {
      BATON_ASSIGN_OR_RETURN(PreTokenizerStep s,
                             RegexStep(kGpt2SplitRegex, SplitBehavior::kIsolated, false));
      out->Add(std::move(s));
    }
    return absl::OkStatus();
  }
  if (type == "Metaspace") {
    PreTokenizerStep s;
    s.kind = PreTokenizerStep::Kind::kMetaspace;
    if (j.contains("replacement") && j["replacement"].is_string()) {
      s.replacement = j["replacement"].get<std::string>();
    }
    std::string scheme = j.value("prepend_scheme", std::string());
    if (scheme.empty()) scheme = j.value("add_prefix_space", true) ? "always" : "never";
    if (scheme == "always") {
      s.prepend = PreTokenizerStep::Prepend::kAlways;
    } else if (scheme == "first") {
      s.prepend = PreTokenizerStep::Prepend::kFirst;
    } else if (scheme == "never") {
      s.prepend = PreTokenizerStep::Prepend::kNever;
    } else {
      return absl::InvalidArgumentError(
          baton::StrCat("pre_tokenizer Metaspace: unknown prepend_scheme '", scheme, "'"));
    }
    s.metaspace_split = j.value("split", true);
    out->Add(std::move(s));
    return absl::OkStatus();
  }
  if (type == "Digits") {
    const bool individual = j.value("individual_digits", false);
    BATON_ASSIGN_OR_RETURN(PreTokenizerStep s, RegexStep(individual ? R"(\p{N})" : R"(\p{N}+)",
                                                         SplitBehavior::kIsolated, false));
    out->Add(std::move(s));
    return absl::OkStatus();
  }
  if (type == "Punctuation") {
    BATON_ASSIGN_OR_RETURN(SplitBehavior b, ParseBehavior(j, "pre_tokenizer Punctuation"));
    BATON_ASSIGN_OR_RETURN(PreTokenizerStep s, RegexStep(R"([\p{P}!-/:-@\[-`{-~])", b, false));
    out->Add(std::move(s));
    return absl::OkStatus();
  }
  if (type == "Whitespace") {
    BATON_ASSIGN_OR_RETURN(PreTokenizerStep s,
                           RegexStep(R"(\w+|[^\w\s]+)", SplitBehavior::kRemoved, true));
    out->Add(std::move(s));
    return absl::OkStatus();
  }
  if (type == "WhitespaceSplit") {
    BATON_ASSIGN_OR_RETURN(PreTokenizerStep s, RegexStep(R"(\s+)", SplitBehavior::kRemoved, false));
    out->Add(std::move(s));
    return absl::OkStatus();
  }
  return absl::UnimplementedError(baton::StrCat(
      "tokenizer.json: unsupported pre_tokenizer type '", type,
      "' (supported: Sequence, Split, ByteLevel, Metaspace, Digits, Punctuation, Whitespace, "
      "WhitespaceSplit)"));
}

// Splits one piece by a step's delimiter and appends the resulting pieces. The merge
// rules follow HF tokenizers' SplitDelimiterBehavior exactly, including runs of
// adjacent delimiters.
void SplitPiece(const PreTokenizerStep& s, std::string_view piece,
                std::vector<std::pair<size_t, size_t>>* scratch,
                std::vector<std::string_view>* out) {
  scratch->clear();
  if (s.regex) {
    s.regex->FindAll(piece, scratch);
  } else if (!s.literal.empty()) {
    for (size_t pos = piece.find(s.literal); pos != std::string_view::npos;
         pos = piece.find(s.literal, pos + s.literal.size())) {
      scratch->emplace_back(pos, pos + s.literal.size());
    }
  }
  if (scratch->empty() && !s.invert) {
    out->push_back(piece);
    return;
  }
  struct Segment {
    size_t b, e;
    bool delim;
  };
  // Scratch space reused across calls on this thread: this runs once per piece.
  thread_local std::vector<Segment> segs;
  thread_local std::vector<Segment> merged;
  segs.clear();
  merged.clear();
  size_t last = 0;
  for (const auto& [b, e] : *scratch) {
    if (b > last) segs.push_back({last, b, s.invert});
    segs.push_back({b, e, !s.invert});
    last = e;
  }
  if (last < piece.size()) segs.push_back({last, piece.size(), s.invert});

  bool previous_delim = false;
  switch (s.behavior) {
    case SplitBehavior::kRemoved:
      for (const Segment& g : segs) {
        if (!g.delim) out->push_back(piece.substr(g.b, g.e - g.b));
      }
      return;
    case SplitBehavior::kIsolated:
      for (const Segment& g : segs) out->push_back(piece.substr(g.b, g.e - g.b));
      return;
    case SplitBehavior::kContiguous:
      for (const Segment& g : segs) {
        if (g.delim == previous_delim && !merged.empty()) {
          merged.back().e = g.e;
        } else {
          merged.push_back(g);
        }
        previous_delim = g.delim;
      }
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const Segment& g : segs) {
        if (g.delim && !previous_delim && !merged.empty()) {
          merged.back().e = g.e;
        } else {
          merged.push_back(g);
        }
        previous_delim = g.delim;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = segs.rbegin(); it != segs.rend(); ++it) {
        if (it->delim && !previous_delim && !merged.empty()) {
          merged.back().b = it->b;
        } else {
          merged.push_back(*it);
        }
        previous_delim = it->delim;
      }
      std::reverse(merged.begin(), merged.end());
      break;
  }
  for (const Segment& g : merged) {
    if (g.e > g.b) out->push_back(piece.substr(g.b, g.e - g.b));
  }
}

}  // namespace

absl::StatusOr<PreTokenizer> PreTokenizer::FromJson(const nlohmann::json& j) {
  PreTokenizer p;
  if (j.is_null()) return p;
  if (!j.is_object()) {
    return absl::InvalidArgumentError("tokenizer.json: 'pre_tokenizer' must be an object");
  }
  BATON_RETURN_IF_ERROR(ParseStep(j, &p));
  return p;
}

absl::StatusOr<PreTokenizer> PreTokenizer::FromRegexSequence(
    const std::vector<std::string>& patterns) {
  PreTokenizer p;
  for (const std::string& pattern : patterns) {
    BATON_ASSIGN_OR_RETURN(PreTokenizerStep s, RegexStep(pattern, SplitBehavior::kIsolated, false));
    p.Add(std::move(s));
  }
  return p;
}

void PreTokenizer::Run(std::string_view text, bool first_segment, PieceBuffer* out) const {
  // Reused across calls on this thread; Run executes once per text segment.
  thread_local std::vector<std::string_view> current;
  thread_local std::vector<std::string_view> next;
  thread_local std::vector<std::pair<size_t, size_t>> scratch;
  current.assign(1, text);
  for (const PreTokenizerStep& s : steps_) {
    next.clear();
    switch (s.kind) {
      case PreTokenizerStep::Kind::kSplit:
        for (std::string_view piece : current) SplitPiece(s, piece, &scratch, &next);
        break;
      case PreTokenizerStep::Kind::kByteLevelPrefix:
        for (std::string_view piece : current) {
          if (!piece.empty() && piece[0] != ' ') {
            out->owned.push_back(baton::StrCat(" ", piece));
            next.push_back(out->owned.back());
          } else {
            next.push_back(piece);
          }
        }
        break;
      case PreTokenizerStep::Kind::kMetaspace:
        for (size_t i = 0; i < current.size(); ++i) {
          std::string replaced = baton::ReplaceAll(current[i], " ", s.replacement);
          const bool prepend =
              s.prepend == PreTokenizerStep::Prepend::kAlways ||
              (s.prepend == PreTokenizerStep::Prepend::kFirst && first_segment && i == 0);
          if (prepend && !replaced.empty() && replaced.rfind(s.replacement, 0) != 0) {
            replaced.insert(0, s.replacement);
          }
          out->owned.push_back(std::move(replaced));
          std::string_view owned = out->owned.back();
          if (s.metaspace_split) {
            PreTokenizerStep split;
            split.literal = s.replacement;
            split.behavior = SplitBehavior::kMergedWithNext;
            SplitPiece(split, owned, &scratch, &next);
          } else {
            next.push_back(owned);
          }
        }
        break;
    }
    current.swap(next);
  }
  for (std::string_view piece : current) {
    if (!piece.empty()) out->pieces.push_back(piece);
  }
}

}  // namespace baton::tokenizer
