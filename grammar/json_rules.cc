#include "grammar/json_rules.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "common/strings.h"

namespace baton::grammar {
namespace {

using Symbol = GrammarBuilder::Symbol;
using B = GrammarBuilder;

std::vector<Symbol> Concat(std::vector<Symbol> a, const std::vector<Symbol>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

ByteSet Set(std::string_view bytes) {
  ByteSet s;
  for (char c : bytes) s.Add(static_cast<uint8_t>(c));
  return s;
}

ByteSet Hex() {
  ByteSet s = ByteSet::Range('0', '9');
  s.AddRange('a', 'f');
  s.AddRange('A', 'F');
  return s;
}

// The alternatives of one string character after the opening quote: an unescaped ASCII
// character, an escape, or one complete, valid UTF-8 sequence (no overlongs, no
// surrogates, nothing past U+10FFFF). Escapes are written out, not a rule of their own:
// the token tables (token_table.h) are exact only inside one rule, and a one-character
// rule would leave every token longer than it to be decided at decode time.
std::vector<std::vector<Symbol>> CharAlternatives() {
  ByteSet ascii = ByteSet::Range(0x20, 0x7f);
  ascii.Remove('"');
  ascii.Remove('\\');
  const Symbol cont = B::Bytes(ByteSet::Range(0x80, 0xbf));
  ByteSet three = ByteSet::Range(0xe1, 0xec);
  three.AddRange(0xee, 0xef);
  // \uXXXX: a surrogate only as a high-low pair, as JSON parsers require.
  const Symbol hex = B::Bytes(Hex());
  ByteSet not_d = Hex();
  not_d.Remove('d');
  not_d.Remove('D');
  const Symbol bs = B::Byte('\\');
  return {
      {B::Bytes(ascii)},
      {bs, B::Bytes(Set("\"\\/bfnrt"))},
      {bs, B::Byte('u'), B::Bytes(not_d), hex, hex, hex},
      {bs, B::Byte('u'), B::Bytes(Set("dD")), B::Bytes(ByteSet::Range('0', '7')), hex, hex},
      {bs, B::Byte('u'), B::Bytes(Set("dD")), B::Bytes(Set("89abAB")), hex, hex, bs, B::Byte('u'),
       B::Bytes(Set("dD")), B::Bytes(Set("cdefCDEF")), hex, hex},
      {B::Bytes(ByteSet::Range(0xc2, 0xdf)), cont},
      {B::Byte(0xe0), B::Bytes(ByteSet::Range(0xa0, 0xbf)), cont},
      {B::Bytes(three), cont, cont},
      {B::Byte(0xed), B::Bytes(ByteSet::Range(0x80, 0x9f)), cont},
      {B::Byte(0xf0), B::Bytes(ByteSet::Range(0x90, 0xbf)), cont, cont},
      {B::Bytes(ByteSet::Range(0xf1, 0xf3)), cont, cont, cont},
      {B::Byte(0xf4), B::Bytes(ByteSet::Range(0x80, 0x8f)), cont, cont},
  };
}

}  // namespace

int32_t JsonRules::Ws() {
  if (ws_ >= 0) return ws_;
  // Nothing or one space: small models spend tokens on indentation, and one-line JSON is
  // what every parser reads anyway.
  ws_ = b_->AddRule("ws");
  b_->AddAlternative(ws_, {});
  b_->AddAlternative(ws_, {B::Byte(' ')});
  return ws_;
}

int32_t JsonRules::ColonWs() { return Ws(); }

int32_t JsonRules::String() {
  if (string_ >= 0) return string_;
  chars_ = b_->AddRule("chars");
  b_->AddAlternative(chars_, {});
  for (auto& alt : CharAlternatives()) {
    alt.push_back(B::Rule(chars_));
    b_->AddAlternative(chars_, std::move(alt));
  }
  string_ = b_->AddRule("string");
  b_->AddAlternative(string_, {B::Byte('"'), B::Rule(chars_), B::Byte('"')});
  return string_;
}

int32_t JsonRules::BoundedString(int64_t min, int64_t max) {
  if (min <= 0 && max < 0) return String();
  String();  // makes chars_
  // s_k: k characters so far; each character's alternatives written into s_k itself, so
  // that a token of several characters stays inside one rule (see CharAlternatives).
  const int64_t last = max >= 0 ? max : min;
  int32_t next = max >= 0 ? -1 : chars_;
  for (int64_t k = last; k >= 0; --k) {
    const int32_t r = b_->AddRule(baton::StrCat("str", min, "_", max, "_", k));
    if (max < 0 && k == last) {
      b_->AddAlternative(r, {B::Rule(chars_)});
    } else {
      if (k >= min) b_->AddAlternative(r, {});
      if (next >= 0) {
        for (auto& alt : CharAlternatives()) {
          alt.push_back(B::Rule(next));
          b_->AddAlternative(r, std::move(alt));
        }
      }
    }
    next = r;
  }
  const int32_t s = b_->AddRule(baton::StrCat("string", min, "_", max));
  b_->AddAlternative(s, {B::Byte('"'), B::Rule(next), B::Byte('"')});
  return s;
}

int32_t JsonRules::Digits(int n) {
  while (static_cast<int>(digits_.size()) <= n) {
    const int k = static_cast<int>(digits_.size());
    const int32_t r = b_->AddRule(baton::StrCat("digits", k));
    b_->AddAlternative(r, {});
    if (k > 0) b_->AddAlternative(r, {B::Bytes(ByteSet::Range('0', '9')), B::Rule(digits_[k - 1])});
    digits_.push_back(r);
  }
  return digits_[n];
}

int32_t JsonRules::Integer() {
  if (integer_ >= 0) return integer_;
  const int32_t more = Digits(kMaxIntDigits - 1);
  integer_ = b_->AddRule("integer");
  for (bool minus : {false, true}) {
    std::vector<Symbol> sign;
    if (minus) sign.push_back(B::Byte('-'));
    b_->AddAlternative(integer_, Concat(sign, {B::Byte('0')}));
    b_->AddAlternative(integer_, Concat(sign, {B::Bytes(ByteSet::Range('1', '9')), B::Rule(more)}));
  }
  return integer_;
}

std::vector<Symbol> JsonRules::Embed(Alternatives alts) {
  if (alts.size() == 1) return std::move(alts[0]);
  const int32_t r = b_->AddRule("int_range");
  for (auto& alt : alts) b_->AddAlternative(r, std::move(alt));
  return {B::Rule(r)};
}

JsonRules::Alternatives JsonRules::DigitRange(const std::string& x, const std::string& y) {
  if (x.empty()) return {{}};
  const Symbol digit = B::Bytes(ByteSet::Range('0', '9'));
  const size_t n = x.size() - 1;
  if (x[0] == y[0]) {
    return {Concat({B::Byte(x[0])}, Embed(DigitRange(x.substr(1), y.substr(1))))};
  }
  // x[0] < y[0]: x[0] followed by x's tail or more; the digits strictly between followed
  // by anything; y[0] followed by y's tail or less. A first digit whose tail is the whole
  // range joins the middle.
  const bool x_low = x.substr(1) == std::string(n, '0');
  const bool y_high = y.substr(1) == std::string(n, '9');
  Alternatives out;
  char from = x[0], to = y[0];
  if (!x_low) {
    out.push_back(Concat({B::Byte(x[0])}, Embed(DigitRange(x.substr(1), std::string(n, '9')))));
    ++from;
  }
  if (!y_high) --to;
  if (from <= to) {
    std::vector<Symbol> alt = {B::Bytes(ByteSet::Range(from, to))};
    alt.insert(alt.end(), n, digit);
    out.push_back(std::move(alt));
  }
  if (!y_high) {
    out.push_back(Concat({B::Byte(y[0])}, Embed(DigitRange(std::string(n, '0'), y.substr(1)))));
  }
  return out;
}

JsonRules::Alternatives JsonRules::MagnitudeRange(int64_t a, int64_t b) {
  auto digits = [](int64_t v) { return static_cast<int>(std::to_string(v).size()); };
  auto pow10 = [](int k) {
    int64_t p = 1;
    while (k-- > 0) p *= 10;
    return p;
  };
  const int da = digits(a), db = digits(b);
  if (da == db) return DigitRange(std::to_string(a), std::to_string(b));
  // The shortest and the longest length on their own; the lengths between are free:
  // [1-9] followed by da..db-2 digits.
  Alternatives out = DigitRange(std::to_string(a), std::to_string(pow10(da) - 1));
  if (db - da >= 2) {
    std::vector<Symbol> alt = {B::Bytes(ByteSet::Range('1', '9'))};
    alt.insert(alt.end(), da, B::Bytes(ByteSet::Range('0', '9')));
    if (db - 2 > da) alt.push_back(B::Rule(Digits(db - 2 - da)));
    out.push_back(std::move(alt));
  }
  for (auto& alt : DigitRange(std::to_string(pow10(db - 1)), std::to_string(b))) {
    out.push_back(std::move(alt));
  }
  return out;
}

int32_t JsonRules::IntegerRange(int64_t lo, int64_t hi) {
  Alternatives alts;
  if (hi >= 0) alts = MagnitudeRange(std::max<int64_t>(lo, 0), hi);
  if (lo < 0) {
    // "-" and a magnitude of at least 1: no "-0".
    alts.push_back(Concat({B::Byte('-')}, Embed(MagnitudeRange(std::max<int64_t>(-hi, 1), -lo))));
  }
  const int32_t r = b_->AddRule(baton::StrCat("integer", lo, "_", hi));
  for (auto& alt : alts) b_->AddAlternative(r, std::move(alt));
  return r;
}

int32_t JsonRules::Number() {
  if (number_ >= 0) return number_;
  const Symbol digit = B::Bytes(ByteSet::Range('0', '9'));
  const int32_t frac = b_->AddRule("fraction");
  b_->AddAlternative(frac, {});
  b_->AddAlternative(frac, {B::Byte('.'), digit, B::Rule(Digits(kMaxFracDigits - 1))});
  const int32_t exp = b_->AddRule("exponent");
  b_->AddAlternative(exp, {});
  for (const char* sign : {"", "+", "-"}) {
    b_->AddAlternative(exp, Concat(Concat({B::Bytes(Set("eE"))}, GrammarBuilder::Literal(sign)),
                                   {digit, B::Rule(Digits(kMaxExpDigits - 1))}));
  }
  number_ = b_->AddRule("number");
  b_->AddAlternative(number_, {B::Rule(Integer()), B::Rule(frac), B::Rule(exp)});
  return number_;
}

int32_t JsonRules::Boolean() {
  if (boolean_ >= 0) return boolean_;
  boolean_ = b_->AddRule("boolean");
  b_->AddAlternative(boolean_, GrammarBuilder::Literal("true"));
  b_->AddAlternative(boolean_, GrammarBuilder::Literal("false"));
  return boolean_;
}

int32_t JsonRules::Null() {
  if (null_ >= 0) return null_;
  null_ = b_->AddRule("null");
  b_->AddAlternative(null_, GrammarBuilder::Literal("null"));
  return null_;
}

int32_t JsonRules::AnyObject() {
  AnyValue();
  return any_object_;
}

int32_t JsonRules::AnyValue() {
  if (any_ >= 0) return any_;
  any_ = b_->AddRule("value");
  const int32_t ws = Ws();
  const int32_t str = String();
  // object
  const int32_t member = b_->AddRule("member");
  b_->AddAlternative(member, {B::Rule(str), B::Byte(':'), B::Rule(ColonWs()), B::Rule(any_)});
  const int32_t members = b_->AddRule("members");
  b_->AddAlternative(members, {});
  b_->AddAlternative(members, {B::Byte(','), B::Rule(ws), B::Rule(member), B::Rule(members)});
  any_object_ = b_->AddRule("object");
  b_->AddAlternative(any_object_, {B::Byte('{'), B::Rule(ws), B::Byte('}')});
  b_->AddAlternative(any_object_, {B::Byte('{'), B::Rule(ws), B::Rule(member), B::Rule(members),
                                   B::Rule(ws), B::Byte('}')});
  // array
  const int32_t values = b_->AddRule("values");
  b_->AddAlternative(values, {});
  b_->AddAlternative(values, {B::Byte(','), B::Rule(ws), B::Rule(any_), B::Rule(values)});
  const int32_t array = b_->AddRule("array");
  b_->AddAlternative(array, {B::Byte('['), B::Rule(ws), B::Byte(']')});
  b_->AddAlternative(array, {B::Byte('['), B::Rule(ws), B::Rule(any_), B::Rule(values), B::Rule(ws),
                             B::Byte(']')});
  for (int32_t r : {any_object_, array, str, Number(), Boolean(), Null()}) {
    b_->AddAlternative(any_, {B::Rule(r)});
  }
  return any_;
}

int32_t JsonRules::Date() {
  if (date_ >= 0) return date_;
  const Symbol digit = B::Bytes(ByteSet::Range('0', '9'));
  // Days per month; February gets 29 in every year (no leap-year arithmetic in a grammar
  // this small; docs/structured_outputs.md).
  auto day = [&](const char* name, char last_tens, ByteSet last_units) {
    const int32_t r = b_->AddRule(name);
    b_->AddAlternative(r, {B::Byte('0'), B::Bytes(ByteSet::Range('1', '9'))});
    b_->AddAlternative(r, {B::Bytes(ByteSet::Range('1', '2')), digit});
    if (last_tens == '3') b_->AddAlternative(r, {B::Byte('3'), B::Bytes(last_units)});
    return r;
  };
  const int32_t d31 = day("day31", '3', Set("01"));
  const int32_t d30 = day("day30", '3', Set("0"));
  const int32_t d29 = day("day29", '2', ByteSet{});
  date_ = b_->AddRule("date");
  for (const char* m : {"01", "03", "05", "07", "08", "10", "12", "04", "06", "09", "11", "02"}) {
    const std::string month = m;
    const int32_t d = month == "02"                                                        ? d29
                      : (month == "04" || month == "06" || month == "09" || month == "11") ? d30
                                                                                           : d31;
    b_->AddAlternative(date_, Concat(Concat({digit, digit, digit, digit, B::Byte('-')},
                                            GrammarBuilder::Literal(month + "-")),
                                     {B::Rule(d)}));
  }
  return date_;
}

int32_t JsonRules::Time() {
  if (time_ >= 0) return time_;
  const Symbol digit = B::Bytes(ByteSet::Range('0', '9'));
  const Symbol six = B::Bytes(ByteSet::Range('0', '5'));
  const int32_t hour = b_->AddRule("hour");
  b_->AddAlternative(hour, {B::Bytes(Set("01")), digit});
  b_->AddAlternative(hour, {B::Byte('2'), B::Bytes(ByteSet::Range('0', '3'))});
  const int32_t secfrac = b_->AddRule("secfrac");
  b_->AddAlternative(secfrac, {});
  b_->AddAlternative(secfrac, {B::Byte('.'), digit, B::Rule(Digits(8))});
  const int32_t offset = b_->AddRule("offset");
  b_->AddAlternative(offset, {B::Byte('Z')});
  b_->AddAlternative(offset, {B::Bytes(Set("+-")), B::Rule(hour), B::Byte(':'), six, digit});
  time_ = b_->AddRule("time");
  b_->AddAlternative(time_, {B::Rule(hour), B::Byte(':'), six, digit, B::Byte(':'), six, digit,
                             B::Rule(secfrac), B::Rule(offset)});
  return time_;
}

int32_t JsonRules::Format(const std::string& name) {
  std::vector<Symbol> body;
  if (name == "date") {
    body = {B::Rule(Date())};
  } else if (name == "time") {
    body = {B::Rule(Time())};
  } else if (name == "date-time") {
    body = {B::Rule(Date()), B::Byte('T'), B::Rule(Time())};
  } else if (name == "uuid") {
    const Symbol hex = B::Bytes(Hex());
    for (int group : {8, 4, 4, 4, 12}) {
      if (!body.empty()) body.push_back(B::Byte('-'));
      for (int i = 0; i < group; ++i) body.push_back(hex);
    }
  } else {
    return -1;
  }
  const int32_t r = b_->AddRule(baton::StrCat("format_", name));
  body.insert(body.begin(), B::Byte('"'));
  body.push_back(B::Byte('"'));
  b_->AddAlternative(r, std::move(body));
  return r;
}

}  // namespace baton::grammar
