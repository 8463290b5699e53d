#include "template/jinja_strings.h"
#include "common/strings.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "common/utf8.h"
#include "utf8proc.h"

namespace baton::templating::jinja {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

void AppendUtf16Units(char32_t cp, std::u16string* out) {
  if (cp >= 0x10000) {
    cp -= 0x10000;
    out->push_back(static_cast<char16_t>(0xD800 + (cp >> 10)));
    out->push_back(static_cast<char16_t>(0xDC00 + (cp & 0x3FF)));
  } else {
    out->push_back(static_cast<char16_t>(cp));
  }
}

std::u16string ToUtf16(std::string_view s) {
  std::u16string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) AppendUtf16Units(NextCodePoint(s, &pos), &out);
  return out;
}

// Full (one-to-many) case mappings that utf8proc's simple mapping lacks, for the code
// points templates are likely to meet; JavaScript applies the whole SpecialCasing table.
const char* SpecialUpper(char32_t cp) {
  switch (cp) {
    case 0x00DF:
      return "SS";
    case 0x0149:
      return "\xCA\xBCN";
    case 0xFB00:
      return "FF";
    case 0xFB01:
      return "FI";
    case 0xFB02:
      return "FL";
    case 0xFB03:
      return "FFI";
    case 0xFB04:
      return "FFL";
    case 0xFB05:
    case 0xFB06:
      return "ST";
    default:
      return nullptr;
  }
}

template <typename Map>
std::string MapCodePoints(std::string_view s, Map map) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) {
    size_t start = pos;
    char32_t cp = 0;
    if (!DecodeUtf8(s, &pos, &cp)) {
      out.append(s.substr(start, pos - start));
      continue;
    }
    map(cp, &out);
  }
  return out;
}

// Length of the longest StrDecimalLiteral prefix of s (no sign), 0 when there is none.
size_t DecimalPrefix(std::string_view s) {
  size_t i = 0;
  size_t int_digits = 0;
  while (i < s.size() && IsDigit(s[i])) ++i, ++int_digits;
  size_t frac_digits = 0;
  if (i < s.size() && s[i] == '.') {
    size_t j = i + 1;
    while (j < s.size() && IsDigit(s[j])) ++j, ++frac_digits;
    if (int_digits > 0 || frac_digits > 0) i = j;
  }
  if (int_digits == 0 && frac_digits == 0) return 0;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    size_t j = i + 1;
    if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
    size_t exp_start = j;
    while (j < s.size() && IsDigit(s[j])) ++j;
    if (j > exp_start) i = j;
  }
  return i;
}

double ParseDecimal(std::string_view digits) {
  std::string copy(digits);
  return std::strtod(copy.c_str(), nullptr);
}

}  // namespace

bool IsJsSpace(char32_t cp) {
  switch (cp) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x20:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
    case 0xFEFF:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

char32_t NextCodePoint(std::string_view s, size_t* pos) {
  char32_t cp = 0;
  if (!DecodeUtf8(s, pos, &cp)) return kReplacementChar;
  return cp;
}

std::string_view JsTrimStart(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    size_t next = pos;
    if (!IsJsSpace(NextCodePoint(s, &next))) break;
    pos = next;
  }
  return s.substr(pos);
}

std::string_view JsTrimEnd(std::string_view s) {
  // Walk forwards so that multi-byte sequences are never split; remember where the
  // trailing run of whitespace starts.
  size_t pos = 0, end = 0;
  while (pos < s.size()) {
    if (!IsJsSpace(NextCodePoint(s, &pos))) end = pos;
  }
  return s.substr(0, end);
}

std::string_view JsTrim(std::string_view s) { return JsTrimEnd(JsTrimStart(s)); }

size_t Utf16Length(std::string_view s) {
  size_t n = 0, pos = 0;
  while (pos < s.size()) n += NextCodePoint(s, &pos) >= 0x10000 ? 2 : 1;
  return n;
}

std::optional<std::string> Utf16At(std::string_view s, double index) {
  if (std::isnan(index)) index = 0;
  index = std::trunc(index);
  double len = static_cast<double>(Utf16Length(s));
  if (index < 0) index += len;
  if (index < 0 || index >= len) return std::nullopt;
  size_t target = static_cast<size_t>(index), unit = 0, pos = 0;
  while (pos < s.size()) {
    size_t start = pos;
    char32_t cp = NextCodePoint(s, &pos);
    size_t width = cp >= 0x10000 ? 2 : 1;
    if (target < unit + width) {
      if (width == 2) return std::string(kReplacementUtf8);
      return std::string(s.substr(start, pos - start));
    }
    unit += width;
  }
  return std::nullopt;
}

std::vector<std::string_view> SplitOn(std::string_view s, std::string_view sep) {
  std::vector<std::string_view> parts;
  size_t pos = 0;
  while (!sep.empty()) {
    size_t hit = s.find(sep, pos);
    if (hit == std::string_view::npos) break;
    parts.push_back(s.substr(pos, hit - pos));
    pos = hit + sep.size();
  }
  parts.push_back(s.substr(pos));
  return parts;
}

std::vector<std::string_view> CodePoints(std::string_view s) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t start = pos;
    NextCodePoint(s, &pos);
    out.push_back(s.substr(start, pos - start));
  }
  return out;
}

int Utf16Compare(std::string_view a, std::string_view b) {
  std::u16string ua = ToUtf16(a), ub = ToUtf16(b);
  return ua < ub ? -1 : (ua > ub ? 1 : 0);
}

std::string JsToUpper(std::string_view s) {
  return MapCodePoints(s, [](char32_t cp, std::string* out) {
    if (cp < 0x80) {
      out->push_back(cp >= 'a' && cp <= 'z' ? static_cast<char>(cp - 32) : static_cast<char>(cp));
    } else if (const char* special = SpecialUpper(cp)) {
      out->append(special);
    } else {
      AppendUtf8(static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(cp))), out);
    }
  });
}

std::string JsToLower(std::string_view s) {
  return MapCodePoints(s, [](char32_t cp, std::string* out) {
    if (cp < 0x80) {
      out->push_back(cp >= 'A' && cp <= 'Z' ? static_cast<char>(cp + 32) : static_cast<char>(cp));
    } else if (cp == 0x0130) {
      out->append("i\xCC\x87");
    } else {
      AppendUtf8(static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))), out);
    }
  });
}

std::string JsTitle(std::string_view s) {
  auto is_word = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || IsDigit(c) || c == '_';
  };
  std::string out(s);
  for (size_t i = 0; i < out.size(); ++i) {
    if (is_word(out[i]) && (i == 0 || !is_word(out[i - 1])) && out[i] >= 'a' && out[i] <= 'z') {
      out[i] = static_cast<char>(out[i] - 32);
    }
  }
  return out;
}

std::string JsCapitalize(std::string_view s) {
  if (s.empty()) return "";
  size_t pos = 0;
  char32_t cp = NextCodePoint(s, &pos);
  // A code point outside the BMP is a surrogate pair in JavaScript; charAt(0) takes its
  // first half, which has no case, so nothing changes.
  if (cp >= 0x10000) return std::string(s);
  return JsToUpper(s.substr(0, pos)) + std::string(s.substr(pos));
}

std::string JsNumberToString(double v) {
  if (std::isnan(v)) return "NaN";
  if (v == 0) return "0";
  if (std::isinf(v)) return v < 0 ? "-Infinity" : "Infinity";
  std::string out = v < 0 ? "-" : "";
  v = std::fabs(v);
  char buf[64];
  auto result = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<size_t>(result.ptr - buf));
  size_t e_pos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e_pos)) {
    if (c != '.') digits.push_back(c);
  }
  int exponent = std::atoi(std::string(sci.substr(e_pos + 1)).c_str());
  int k = static_cast<int>(digits.size());
  int n = exponent + 1;
  if (k <= n && n <= 21) {
    out += digits;
    out.append(static_cast<size_t>(n - k), '0');
  } else if (0 < n && n <= 21) {
    out += digits.substr(0, static_cast<size_t>(n));
    out += '.';
    out += digits.substr(static_cast<size_t>(n));
  } else if (-6 < n && n <= 0) {
    out += "0.";
    out.append(static_cast<size_t>(-n), '0');
    out += digits;
  } else {
    out += digits[0];
    if (k > 1) {
      out += '.';
      out += digits.substr(1);
    }
    out += 'e';
    out += n - 1 >= 0 ? '+' : '-';
    out += std::to_string(std::abs(n - 1));
  }
  return out;
}

std::string JsFloatToString(double v) {
  if (v == 0 && std::signbit(v)) return "-0.0";
  if (std::isfinite(v) && std::fmod(v, 1.0) == 0) {
    if (std::fabs(v) >= 1e21) return JsNumberToString(v);
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.0f", v);
    return baton::StrCat(buf, ".0");
  }
  return JsNumberToString(v);
}

void AppendJsonString(std::string_view s, bool ensure_ascii, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  auto append_unit = [&](unsigned unit) {
    out->append("\\u");
    for (int shift = 12; shift >= 0; shift -= 4) out->push_back(kHex[(unit >> shift) & 0xF]);
  };
  out->push_back('"');
  size_t pos = 0;
  while (pos < s.size()) {
    size_t start = pos;
    char32_t cp = NextCodePoint(s, &pos);
    switch (cp) {
      case '"':
        out->append("\\\"");
        continue;
      case '\\':
        out->append("\\\\");
        continue;
      case '\b':
        out->append("\\b");
        continue;
      case '\f':
        out->append("\\f");
        continue;
      case '\n':
        out->append("\\n");
        continue;
      case '\r':
        out->append("\\r");
        continue;
      case '\t':
        out->append("\\t");
        continue;
      default:
        break;
    }
    if (cp < 0x20) {
      append_unit(cp);
    } else if (ensure_ascii && cp >= 0x7F) {
      if (cp >= 0x10000) {
        append_unit(0xD800 + ((cp - 0x10000) >> 10));
        append_unit(0xDC00 + ((cp - 0x10000) & 0x3FF));
      } else {
        append_unit(cp);
      }
    } else if (cp == kReplacementChar) {
      out->append(kReplacementUtf8);
    } else {
      out->append(s.substr(start, pos - start));
    }
  }
  out->push_back('"');
}

double JsParseInt(std::string_view s) {
  s = JsTrimStart(s);
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  size_t n = 0;
  while (n < s.size() && IsDigit(s[n])) ++n;
  if (n == 0) return kNaN;
  double v = ParseDecimal(s.substr(0, n));
  return negative ? -v : v;
}

double JsParseFloat(std::string_view s) {
  s = JsTrimStart(s);
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  double v;
  if (s.substr(0, 8) == "Infinity") {
    v = std::numeric_limits<double>::infinity();
  } else {
    size_t n = DecimalPrefix(s);
    if (n == 0) return kNaN;
    v = ParseDecimal(s.substr(0, n));
  }
  return negative ? -v : v;
}

double JsStringToNumber(std::string_view s) {
  s = JsTrim(s);
  if (s.empty()) return 0;
  if (s.size() > 2 && s[0] == '0') {
    int base = 0;
    char p = static_cast<char>(s[1] | 0x20);
    if (p == 'x') base = 16;
    if (p == 'o') base = 8;
    if (p == 'b') base = 2;
    if (base != 0) {
      double v = 0;
      for (char c : s.substr(2)) {
        int d = IsDigit(c) ? c - '0'
                           : ((c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10 : 99);
        if (d >= base) return kNaN;
        v = v * base + d;
      }
      return v;
    }
  }
  bool negative = false;
  std::string_view body = s;
  if (body[0] == '+' || body[0] == '-') {
    negative = body[0] == '-';
    body.remove_prefix(1);
  }
  double v;
  if (body == "Infinity") {
    v = std::numeric_limits<double>::infinity();
  } else {
    if (body.empty() || DecimalPrefix(body) != body.size()) return kNaN;
    v = ParseDecimal(body);
  }
  return negative ? -v : v;
}

std::string JsReplace(std::string_view s, std::string_view from, std::string_view to,
                      std::optional<double> count) {
  if (count && *count == 0) return std::string(s);
  double remaining = (!count || *count < 0) ? std::numeric_limits<double>::infinity() : *count;
  std::string out;
  if (from.empty()) {
    size_t pos = 0;
    while (true) {
      if (remaining > 0) {
        out += to;
        --remaining;
      }
      if (pos >= s.size()) break;
      size_t start = pos;
      NextCodePoint(s, &pos);
      out.append(s.substr(start, pos - start));
    }
    return out;
  }
  size_t pos = 0;
  while (remaining > 0) {
    size_t hit = s.find(from, pos);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(pos, hit - pos));
    out += to;
    pos = hit + from.size();
    --remaining;
  }
  out.append(s.substr(pos));
  return out;
}

std::string JsStrftime(std::string_view format, const DateParts& date) {
  static constexpr const char* kLong[] = {"January",   "February", "March",    "April",
                                          "May",       "June",     "July",     "August",
                                          "September", "October",  "November", "December"};
  static constexpr const char* kShort[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                           "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  auto pad2 = [](int n) { return n < 10 ? baton::StrCat("0", n) : baton::StrCat(n); };
  int month = date.month >= 1 && date.month <= 12 ? date.month - 1 : 0;
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%' || i + 1 >= format.size()) {
      out.push_back(format[i]);
      continue;
    }
    switch (format[i + 1]) {
      case 'Y':
        out += baton::StrCat(date.year);
        break;
      case 'm':
        out += pad2(date.month);
        break;
      case 'd':
        out += pad2(date.day);
        break;
      case 'b':
        out += kShort[month];
        break;
      case 'B':
        out += kLong[month];
        break;
      case 'H':
        out += pad2(date.hour);
        break;
      case 'M':
        out += pad2(date.minute);
        break;
      case '%':
        out += '%';
        break;
      default:
        out.push_back('%');
        continue;
    }
    ++i;
  }
  return out;
}

}  // namespace baton::templating::jinja
