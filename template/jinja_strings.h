// String and number helpers that reproduce JavaScript semantics on UTF-8 text.
//
// The reference renderer for chat templates is @huggingface/jinja, which runs on
// JavaScript strings (UTF-16) and numbers (IEEE doubles). Baton keeps strings as UTF-8;
// these helpers give the few operations whose result depends on that difference (lengths,
// indexing, ordering, whitespace, number formatting, JSON quoting) the JavaScript answer.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/string_view.h"

namespace baton::templating::jinja {

// Debian's Abseil has its own absl::string_view, distinct from std::string_view.
inline absl::string_view Av(std::string_view s) { return {s.data(), s.size()}; }

// JavaScript's \s: WhiteSpace plus LineTerminator (what trim() and /\s/ remove).
bool IsJsSpace(char32_t cp);

// Decodes the code point at s[*pos] and advances *pos; invalid bytes decode to U+FFFD.
char32_t NextCodePoint(std::string_view s, size_t* pos);

std::string_view JsTrim(std::string_view s);
std::string_view JsTrimStart(std::string_view s);
std::string_view JsTrimEnd(std::string_view s);

// Length in UTF-16 code units (String.prototype.length).
size_t Utf16Length(std::string_view s);
// s.split(sep) with JavaScript semantics (a trailing separator gives a trailing "").
std::vector<std::string_view> SplitOn(std::string_view s, std::string_view sep);

// String.prototype.at(index): one UTF-16 unit, negative indexes count from the end. A unit
// that is half of a surrogate pair comes back as U+FFFD, since UTF-8 cannot hold it.
std::optional<std::string> Utf16At(std::string_view s, double index);
// Array.from(s): the code points, each as its own UTF-8 string.
std::vector<std::string_view> CodePoints(std::string_view s);
// Orders like JavaScript's < on strings (UTF-16 code units).
int Utf16Compare(std::string_view a, std::string_view b);

std::string JsToUpper(std::string_view s);
std::string JsToLower(std::string_view s);
// @huggingface/jinja's title(): uppercases each ASCII word character that follows a
// non-word character (/\b\w/), leaving the rest of each word as it was.
std::string JsTitle(std::string_view s);
// charAt(0).toUpperCase() + slice(1).
std::string JsCapitalize(std::string_view s);

// Number.prototype.toString() / String(n).
std::string JsNumberToString(double v);
// @huggingface/jinja's FloatValue.toString(): integral values keep one decimal ("3.0").
std::string JsFloatToString(double v);
// JSON.stringify(string), then optionally ensure_ascii's \uXXXX escaping of U+007F and up.
void AppendJsonString(std::string_view s, bool ensure_ascii, std::string* out);

// parseInt(s, 10), parseFloat(s) and Number(s); NaN when JavaScript gives NaN.
double JsParseInt(std::string_view s);
double JsParseFloat(std::string_view s);
double JsStringToNumber(std::string_view s);

// @huggingface/jinja's replace(): every (or the first `count`, when count >= 0)
// occurrence of `from`; an empty `from` matches at each code point boundary.
std::string JsReplace(std::string_view s, std::string_view from, std::string_view to,
                      std::optional<double> count);

// Python-style strftime limited to what @huggingface/jinja formats (%Y %m %d %b %B %H %M
// %%); every other directive is left in the output as written.
struct DateParts {
  int year = 1970, month = 1, day = 1, hour = 0, minute = 0;
};
std::string JsStrftime(std::string_view format, const DateParts& date);

}  // namespace baton::templating::jinja
