// The JSON building blocks every schema grammar shares: bounded whitespace, strings
// (escapes, UTF-8), numbers, literals and "any value". Each rule is made once per grammar,
// on first use, so all strings in a grammar share one set of string positions and with
// them one set of precomputed token tables (token_grammar.h).
//
// Bounds (docs/structured_outputs.md): small models loop on whatever is free, so
//  - whitespace between tokens of a container (after '{', '[', ',', ':' and before '}',
//    ']') is nothing or one space; no newlines, no indentation; none elsewhere;
//  - integers have at most kMaxIntDigits digits, fractions kMaxFracDigits, exponents
//    kMaxExpDigits.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "grammar/grammar.h"

namespace baton::grammar {

inline constexpr int kMaxIntDigits = 16;
// The largest integer magnitude the grammar allows: kMaxIntDigits nines.
inline constexpr int64_t kMaxIntMagnitude = 9'999'999'999'999'999;
inline constexpr int kMaxFracDigits = 16;
// Two: every number the grammar allows (at most 1e16 * 1e99) fits a double, so parsers that
// read numbers as doubles (JavaScript, nlohmann, Python's float) never overflow.
inline constexpr int kMaxExpDigits = 2;

class JsonRules {
 public:
  explicit JsonRules(GrammarBuilder* b) : b_(b) {}

  int32_t Ws();       // inside containers: "" | " "
  int32_t ColonWs();  // after ':': the same rule as Ws()
  int32_t String();   // any JSON string
  // A JSON string of min..max characters (code points; max < 0: unbounded).
  int32_t BoundedString(int64_t min, int64_t max);
  int32_t Integer();
  // Exactly the integers in [lo, hi], in JSON's spelling (no leading zeros, no "-0");
  // requires -kMaxIntMagnitude <= lo <= hi <= kMaxIntMagnitude.
  int32_t IntegerRange(int64_t lo, int64_t hi);
  int32_t Number();
  int32_t Boolean();
  int32_t Null();
  int32_t AnyValue();   // any JSON value
  int32_t AnyObject();  // any JSON object
  // A quoted string in the format: "date-time", "date", "time" or "uuid"; -1 otherwise.
  int32_t Format(const std::string& name);

 private:
  int32_t Digits(int n);  // up to n more digits
  int32_t Date();
  int32_t Time();
  using Alternatives = std::vector<std::vector<GrammarBuilder::Symbol>>;
  // The digit strings from x to y (same length, x <= y as numbers).
  Alternatives DigitRange(const std::string& x, const std::string& y);
  // Magnitudes a..b (0 <= a <= b <= kMaxIntMagnitude), without leading zeros.
  Alternatives MagnitudeRange(int64_t a, int64_t b);
  // One alternative as is; several behind a new rule.
  std::vector<GrammarBuilder::Symbol> Embed(Alternatives alts);

  GrammarBuilder* b_;
  int32_t ws_ = -1, string_ = -1, chars_ = -1, integer_ = -1;
  int32_t number_ = -1, boolean_ = -1, null_ = -1, any_ = -1, any_object_ = -1;
  int32_t date_ = -1, time_ = -1;
  std::vector<int32_t> digits_;
};

}  // namespace baton::grammar
