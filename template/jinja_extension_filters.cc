// Filters @huggingface/jinja lacks (or lacks for some operand types), with Python Jinja's
// results. They are reached only where the reference would throw, so they never change
// output the reference produces.
#include <algorithm>
#include <cmath>

#include "absl/container/flat_hash_set.h"
#include "common/status.h"
#include "common/strings.h"
#include "template/jinja_builtins.h"
#include "template/jinja_interpreter.h"
#include "template/jinja_strings.h"
#include "utf8proc.h"

namespace baton::templating::jinja {
namespace {

absl::Status Error(std::string_view message) {
  return absl::InvalidArgumentError(std::string(message));
}

std::string HtmlEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

std::string HtmlUnescape(std::string_view s) {
  static constexpr std::pair<std::string_view, std::string_view> kNamed[] = {
      {"&amp;", "&"},  {"&lt;", "<"},  {"&gt;", ">"},   {"&quot;", "\""},
      {"&#34;", "\""}, {"&#39;", "'"}, {"&apos;", "'"}, {"&nbsp;", "\xC2\xA0"}};
  std::string out;
  for (size_t i = 0; i < s.size();) {
    bool replaced = false;
    if (s[i] == '&') {
      for (const auto& [entity, text] : kNamed) {
        if (s.substr(i, entity.size()) == entity) {
          out += text;
          i += entity.size();
          replaced = true;
          break;
        }
      }
    }
    if (!replaced) out.push_back(s[i++]);
  }
  return out;
}

// markupsafe's striptags(): drop comments and tags, collapse whitespace, unescape.
std::string StripTags(std::string_view s) {
  std::string text;
  for (size_t i = 0; i < s.size();) {
    if (s.substr(i, 4) == "<!--") {
      size_t end = s.find("-->", i + 4);
      if (end != std::string_view::npos) {
        i = end + 3;
        continue;
      }
    }
    if (s[i] == '<') {
      size_t end = s.find('>', i + 1);
      if (end != std::string_view::npos) {
        i = end + 1;
        continue;
      }
    }
    text.push_back(s[i++]);
  }
  std::vector<std::string_view> words;
  size_t pos = 0;
  std::string_view view(text);
  while (pos < view.size()) {
    size_t next = pos;
    if (IsJsSpace(NextCodePoint(view, &next))) {
      pos = next;
      continue;
    }
    size_t start = pos;
    while (pos < view.size()) {
      size_t after = pos;
      if (IsJsSpace(NextCodePoint(view, &after))) break;
      pos = after;
    }
    words.push_back(view.substr(start, pos - start));
  }
  std::string joined;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) joined.push_back(' ');
    joined.append(words[i]);
  }
  return HtmlUnescape(joined);
}

size_t WordCount(std::string_view s) {
  size_t count = 0, pos = 0;
  bool in_word = false;
  while (pos < s.size()) {
    char32_t cp = NextCodePoint(s, &pos);
    auto category = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
    bool word = cp == '_' ||
                (category >= UTF8PROC_CATEGORY_LU && category <= UTF8PROC_CATEGORY_LO) ||
                (category >= UTF8PROC_CATEGORY_ND && category <= UTF8PROC_CATEGORY_NO);
    if (word && !in_word) ++count;
    in_word = word;
  }
  return count;
}

std::string StripChars(std::string_view s, std::string_view chars, bool left, bool right) {
  std::vector<std::string_view> set = CodePoints(chars);
  std::vector<std::string_view> cps = CodePoints(s);
  auto in_set = [&](std::string_view c) {
    return std::find(set.begin(), set.end(), c) != set.end();
  };
  size_t begin = 0, end = cps.size();
  while (left && begin < end && in_set(cps[begin])) ++begin;
  while (right && end > begin && in_set(cps[end - 1])) --end;
  std::string out;
  for (size_t i = begin; i < end; ++i) out.append(cps[i]);
  return out;
}

// Filters Baton implements for at least some operand types; any other name is reported
// as unsupported.
constexpr std::string_view kImplementedFilters[] = {
    "abs",    "batch",  "capitalize", "count",      "d",           "default",   "dictsort",
    "e",      "escape", "first",      "float",      "forceescape", "indent",    "int",
    "items",  "join",   "last",       "length",     "list",        "lower",     "map",
    "max",    "min",    "reject",     "rejectattr", "replace",     "reverse",   "round",
    "safe",   "select", "selectattr", "sort",       "string",      "striptags", "sum",
    "title",  "tojson", "trim",       "unique",     "upper",       "wordcount", "keys",
    "values", "bool",   "strip"};

template <size_t N>
bool Contains(const std::string_view (&names)[N], std::string_view name) {
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

}  // namespace

absl::StatusOr<Value> Interpreter::ApplyExtensionFilter(const Value& operand, std::string_view name,
                                                        EvaluatedArgs* args) {
  EvaluatedArgs none;
  EvaluatedArgs& a = args != nullptr ? *args : none;
  const bool has_args = !a.positional.empty() || a.keywords->size() > 0;
  const ValueKind kind = operand.kind();

  if (name == "d" || name == "default") {
    Value fallback = a.positional.size() > 0 ? a.positional[0] : Value::String("");
    const bool boolean = Truthy(a.Get(1, "boolean").value_or(Value::Bool(false)));
    if (operand.IsUndefined() || (boolean && !Truthy(operand))) return fallback;
    return operand;
  }
  // `x|upper()`: a call with no arguments means the bare filter.
  if (args != nullptr && !has_args) return ApplyBareFilter(operand, name);

  if (name == "count" || name == "length") {
    if (operand.IsString()) return Value::Integer(static_cast<double>(Utf16Length(operand.str())));
    if (operand.IsArrayLike())
      return Value::Integer(static_cast<double>(operand.array().items.size()));
    if (operand.IsObjectLike()) return Value::Integer(static_cast<double>(operand.object().size()));
    if (operand.IsUndefined()) return Value::Integer(0);
  }
  if ((name == "first" || name == "last" || name == "list" || name == "reverse") &&
      operand.IsString()) {
    std::vector<std::string_view> chars = CodePoints(operand.str());
    BATON_RETURN_IF_ERROR(Charge(chars.size()));
    if (name == "first") return chars.empty() ? Value() : Value::String(std::string(chars.front()));
    if (name == "last") return chars.empty() ? Value() : Value::String(std::string(chars.back()));
    if (name == "reverse") {
      std::string out;
      for (auto it = chars.rbegin(); it != chars.rend(); ++it) out.append(*it);
      return Value::String(std::move(out));
    }
    std::vector<Value> out;
    for (std::string_view c : chars) out.push_back(Value::String(std::string(c)));
    return Value::Array(std::move(out));
  }
  if (name == "list" && operand.IsObjectLike()) {
    std::vector<Value> keys;
    for (const auto& [key, value] : operand.object().entries()) keys.push_back(Value::String(key));
    return Value::Array(std::move(keys));
  }
  if (name == "escape" || name == "e" || name == "forceescape") {
    if (operand.IsUndefined()) return Value::String("");
    if (operand.IsNull()) return Value::String("None");
    BATON_ASSIGN_OR_RETURN(std::string text, ToDisplayString(operand, limits_.max_output_bytes));
    return MakeString(HtmlEscape(text));
  }
  if ((name == "trim" || name == "strip") && operand.IsString()) {
    std::optional<Value> chars = a.Get(0, "chars");
    if (!chars || chars->IsNull()) return Value::String(std::string(JsTrim(operand.str())));
    if (!chars->IsString()) return Error("trim chars must be a string");
    return Value::String(StripChars(operand.str(), chars->str(), true, true));
  }
  if (name == "round" && (operand.IsNumber() || kind == ValueKind::kBool)) {
    Value precision = a.Get(0, "precision").value_or(Value::Integer(0));
    Value method = a.Get(1, "method").value_or(Value::String("common"));
    if (!precision.IsNumber() || !method.IsString()) return Error("round(precision, method)");
    const double factor = std::pow(10.0, precision.number());
    const double v = operand.number() * factor;
    double r;
    if (method.str() == "common") {
      r = std::nearbyint(v);
    } else if (method.str() == "ceil") {
      r = std::ceil(v);
    } else if (method.str() == "floor") {
      r = std::floor(v);
    } else {
      return Error("round method must be 'common', 'ceil' or 'floor'");
    }
    return Value::Float(r / factor);
  }
  if (name == "abs" && kind == ValueKind::kBool) return Value::Integer(operand.number());
  if ((name == "striptags" || name == "wordcount") && !operand.IsUndefined()) {
    BATON_ASSIGN_OR_RETURN(std::string text, ToDisplayString(operand, limits_.max_output_bytes));
    if (name == "wordcount") return Value::Integer(static_cast<double>(WordCount(text)));
    return Value::String(StripTags(text));
  }

  if (operand.IsArrayLike()) {
    const std::vector<Value>& items = operand.array().items;
    BATON_RETURN_IF_ERROR(Charge(items.size()));
    if (name == "count" || name == "length")
      return Value::Integer(static_cast<double>(items.size()));
    if (name == "first") return items.empty() ? Value() : items.front();
    if (name == "last") return items.empty() ? Value() : items.back();
    if (name == "list") return Value::Array(items);
    if (name == "reverse") return Value::Array(std::vector<Value>(items.rbegin(), items.rend()));
    if (name == "sum") {
      Value attribute = a.Get(0, "attribute").value_or(Value::Null());
      Value start = a.Get(1, "start").value_or(Value::Integer(0));
      if (!start.IsNumber() && !start.is(ValueKind::kBool))
        return Error("sum() start must be a number");
      double total = start.number();
      bool is_float = start.is(ValueKind::kFloat);
      for (const Value& item : items) {
        Value v = attribute.IsString() ? AttributePath(item, attribute.str()) : item;
        if (!v.IsNumber() && !v.is(ValueKind::kBool)) {
          return Error(StrCat("sum() of a ", KindName(v.kind())));
        }
        total += v.number();
        is_float = is_float || v.is(ValueKind::kFloat);
      }
      return is_float ? Value::Float(total) : Value::Integer(total);
    }
    if (name == "min" || name == "max" || name == "unique") {
      const bool case_sensitive = Truthy(a.Get(0, "case_sensitive").value_or(Value::Bool(false)));
      Value attribute = a.Get(1, "attribute").value_or(Value::Null());
      std::vector<Value> keys;
      for (const Value& item : items) {
        Value key = attribute.IsString() ? AttributePath(item, attribute.str()) : item;
        if (!case_sensitive && key.IsString()) key = Value::String(JsToLower(key.str()));
        keys.push_back(std::move(key));
      }
      if (name == "unique") {
        absl::flat_hash_set<std::string> seen;
        std::vector<Value> out;
        for (size_t i = 0; i < items.size(); ++i) {
          if (seen.insert(SameValueKey(keys[i])).second) out.push_back(items[i]);
        }
        return Value::Array(std::move(out));
      }
      if (items.empty()) return Value();
      size_t best = 0;
      for (size_t i = 1; i < items.size(); ++i) {
        BATON_ASSIGN_OR_RETURN(int order, CompareValues(keys[i], keys[best], true));
        if (name == "min" ? order < 0 : order > 0) best = i;
      }
      return items[best];
    }
    if (name == "batch") {
      Value size = a.Get(0, "linecount").value_or(Value::Null());
      if (!size.IsNumber() || size.number() < 1) return Error("batch() needs a positive linecount");
      std::optional<Value> fill = a.Get(1, "fill_with");
      const size_t n = static_cast<size_t>(std::min(size.number(), 1e15));
      std::vector<Value> batches, current;
      for (const Value& item : items) {
        current.push_back(item);
        if (current.size() == n) batches.push_back(Value::Array(std::exchange(current, {})));
      }
      if (!current.empty()) {
        while (fill && !fill->IsNull() && current.size() < n) current.push_back(*fill);
        batches.push_back(Value::Array(std::move(current)));
      }
      return Value::Array(std::move(batches));
    }
    if (name == "select" || name == "reject") {
      const bool select = name == "select";
      std::optional<std::string> test_name;
      if (!a.positional.empty()) {
        if (!a.positional[0].IsString()) return Error("test name must be a string");
        test_name = a.positional[0].str();
      }
      Args test_args(a.positional.begin() +
                         std::min<ptrdiff_t>(1, static_cast<ptrdiff_t>(a.positional.size())),
                     a.positional.end());
      std::vector<Value> out;
      for (const Value& item : items) {
        bool result = Truthy(item);
        if (test_name) {
          BATON_ASSIGN_OR_RETURN(result, RunTest(*test_name, item, test_args));
        }
        if (result == select) out.push_back(item);
      }
      return Value::Array(std::move(out));
    }
  }

  if (!Contains(kImplementedFilters, name)) {
    return Error(StrCat("unsupported filter '", name, "'"));
  }
  return Error(StrCat("filter '", name, "' cannot be applied to ", KindName(kind),
                      has_args ? " with these arguments" : ""));
}

}  // namespace baton::templating::jinja
