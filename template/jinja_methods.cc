// Methods of strings, lists and dicts (`"x".upper()`, `d.items()`), as @huggingface/jinja
// defines them (`strip` ignores its argument there, and here); Python methods it lacks
// (find, count, join, format, list.append) are Baton extensions.
#include "template/jinja_methods.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_join.h"
#include "common/status.h"
#include "common/strings.h"
#include "template/jinja_builtins.h"
#include "template/jinja_strings.h"

namespace baton::templating::jinja {
namespace {

absl::Status Error(std::string_view message) {
  return absl::InvalidArgumentError(std::string(message));
}

// Arguments may end with the keyword arguments of the call.
const ObjectData* TrailingKwargs(const Args& args) {
  if (!args.empty() && args.back().is(ValueKind::kKwargs)) return &args.back().object();
  return nullptr;
}

Value StringArray(const std::vector<std::string>& parts) {
  std::vector<Value> items;
  items.reserve(parts.size());
  for (const std::string& part : parts) items.push_back(Value::String(part));
  return Value::Array(std::move(items));
}

std::vector<std::string> JsSplit(std::string_view s, std::string_view sep) {
  std::vector<std::string> parts;
  for (std::string_view part : SplitOn(s, sep)) parts.emplace_back(part);
  return parts;
}

absl::StatusOr<Value> StringSplit(Interpreter& interp, const std::string& self, const Args& args) {
  Value sep = args.size() > 0 ? args[0] : Value::Null();
  if (!sep.IsString() && !sep.IsNull()) return Error("sep argument must be a string or null");
  Value maxsplit_value = args.size() > 1 ? args[1] : Value::Integer(-1);
  if (!maxsplit_value.is(ValueKind::kInteger)) return Error("maxsplit argument must be a number");
  const double maxsplit = maxsplit_value.number();
  std::vector<std::string> result;
  if (sep.IsNull()) {
    // Runs of whitespace separate; no empty strings at either end.
    std::string_view text = JsTrimStart(self);
    size_t pos = 0;
    while (pos < text.size()) {
      size_t start = pos;
      size_t next = pos;
      if (IsJsSpace(NextCodePoint(text, &next))) {
        pos = next;
        continue;
      }
      pos = next;
      while (pos < text.size()) {
        size_t after = pos;
        if (IsJsSpace(NextCodePoint(text, &after))) break;
        pos = after;
      }
      if (maxsplit != -1 && static_cast<double>(result.size()) >= maxsplit) {
        result.emplace_back(text.substr(start));
        break;
      }
      result.emplace_back(text.substr(start, pos - start));
    }
  } else {
    if (sep.str().empty()) return Error("empty separator");
    result = JsSplit(self, sep.str());
    if (maxsplit != -1 && static_cast<double>(result.size()) > maxsplit) {
      // result.push(result.splice(maxsplit).join(sep)), with splice's negative start.
      double start = maxsplit < 0 ? std::max(static_cast<double>(result.size()) + maxsplit, 0.0)
                                  : std::min(maxsplit, static_cast<double>(result.size()));
      size_t from = static_cast<size_t>(start);
      std::vector<std::string> rest(result.begin() + static_cast<ptrdiff_t>(from), result.end());
      result.resize(from);
      result.push_back(absl::StrJoin(rest, sep.str()));
    }
  }
  BATON_RETURN_IF_ERROR(interp.Charge(result.size()));
  return StringArray(result);
}

absl::StatusOr<Value> StringAffix(const std::string& self, const Args& args, bool prefix) {
  std::string_view name = prefix ? "startswith" : "endswith";
  if (args.empty()) return Error(StrCat(name, "() requires at least one argument"));
  auto matches = [&](const std::string& p) {
    if (p.size() > self.size()) return false;
    return prefix ? self.compare(0, p.size(), p) == 0
                  : self.compare(self.size() - p.size(), p.size(), p) == 0;
  };
  const Value& pattern = args[0];
  if (pattern.IsString()) return Value::Bool(matches(pattern.str()));
  if (pattern.IsArrayLike()) {
    for (const Value& item : pattern.array().items) {
      if (!item.IsString()) return Error(StrCat(name, "() tuple elements must be strings"));
      if (matches(item.str())) return Value::Bool(true);
    }
    return Value::Bool(false);
  }
  return Error(StrCat(name, "() argument must be a string or tuple of strings"));
}

absl::StatusOr<Value> StringReplace(Interpreter& interp, const std::string& self,
                                    const Args& args) {
  if (args.size() < 2) return Error("replace() requires at least two arguments");
  if (!args[0].IsString() || !args[1].IsString())
    return Error("replace() arguments must be strings");
  Value count = Value::Null();
  if (args.size() > 2) {
    if (args[2].is(ValueKind::kKwargs)) {
      const Value* c = args[2].object().Find("count");
      count = c != nullptr ? *c : Value::Null();
    } else {
      count = args[2];
    }
  }
  if (!count.is(ValueKind::kInteger) && !count.IsNull()) {
    return Error("replace() count argument must be a number or null");
  }
  std::optional<double> n;
  if (count.is(ValueKind::kInteger)) n = count.number();
  // Size the result before building it, so that a replacement cannot allocate far past
  // max_output_bytes.
  const std::string& from = args[0].str();
  const std::string& to = args[1].str();
  if (to.size() > from.size()) {
    double hits = 0;
    if (from.empty()) {
      hits = static_cast<double>(CodePoints(self).size() + 1);
    } else {
      for (size_t pos = self.find(from); pos != std::string::npos;
           pos = self.find(from, pos + from.size())) {
        ++hits;
      }
    }
    if (n && *n >= 0) hits = std::min(hits, *n);
    const double size =
        static_cast<double>(self.size()) + hits * static_cast<double>(to.size() - from.size());
    BATON_RETURN_IF_ERROR(interp.CheckSize(static_cast<size_t>(std::min(size, 1e18))));
  }
  return interp.MakeString(JsReplace(self, from, to, n));
}

// Python's str.format() for "{}", "{0}" and "{name}" fields (Baton extension).
absl::StatusOr<Value> StringFormat(Interpreter& interp, const std::string& self, const Args& args) {
  const ObjectData* kwargs = TrailingKwargs(args);
  const size_t positional = args.size() - (kwargs != nullptr ? 1 : 0);
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < self.size(); ++i) {
    char c = self[i];
    if (c == '}') {
      if (i + 1 < self.size() && self[i + 1] == '}') ++i;
      out.push_back('}');
      continue;
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (i + 1 < self.size() && self[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    size_t close = self.find('}', i);
    if (close == std::string::npos) return Error("format(): single '{' encountered");
    std::string field = self.substr(i + 1, close - i - 1);
    if (field.find_first_of(":!") != std::string::npos) {
      return Error("format(): conversions and format specs are not supported");
    }
    const Value* value = nullptr;
    if (field.empty()) {
      if (auto_index < positional) value = &args[auto_index];
      ++auto_index;
    } else if (std::all_of(field.begin(), field.end(),
                           [](char d) { return d >= '0' && d <= '9'; })) {
      size_t index = static_cast<size_t>(std::strtoul(field.c_str(), nullptr, 10));
      if (index < positional) value = &args[index];
    } else if (kwargs != nullptr) {
      value = kwargs->Find(field);
    }
    if (value == nullptr) return Error(StrCat("format(): no argument for field '{", field, "}'"));
    BATON_ASSIGN_OR_RETURN(std::string text,
                           ToDisplayString(*value, interp.limits().max_output_bytes));
    out += text;
    BATON_RETURN_IF_ERROR(interp.CheckSize(out.size()));
    i = close;
  }
  return Value::String(std::move(out));
}

template <typename F>
Value Method(const Value& self, std::string name, F body) {
  return MakeFunction(
      std::move(name),
      [self, body](Interpreter& interp, Args& args, const EnvPtr&) -> absl::StatusOr<Value> {
        return body(interp, self, args);
      });
}

std::optional<Value> StringBuiltin(const Value& self, std::string_view name) {
  using R = absl::StatusOr<Value>;
  if (name == "length") return Value::Integer(static_cast<double>(Utf16Length(self.str())));
  if (name == "upper") {
    return Method(self, "upper", [](Interpreter&, const Value& s, Args&) -> R {
      return Value::String(JsToUpper(s.str()));
    });
  }
  if (name == "lower") {
    return Method(self, "lower", [](Interpreter&, const Value& s, Args&) -> R {
      return Value::String(JsToLower(s.str()));
    });
  }
  // strip/lstrip/rstrip ignore their argument in the reference ("x".strip("\n") trims all
  // whitespace); Baton does the same so that output matches.
  if (name == "strip") {
    return Method(self, "strip", [](Interpreter&, const Value& s, Args&) -> R {
      return Value::String(std::string(JsTrim(s.str())));
    });
  }
  if (name == "lstrip") {
    return Method(self, "lstrip", [](Interpreter&, const Value& s, Args&) -> R {
      return Value::String(std::string(JsTrimStart(s.str())));
    });
  }
  if (name == "rstrip") {
    return Method(self, "rstrip", [](Interpreter&, const Value& s, Args&) -> R {
      return Value::String(std::string(JsTrimEnd(s.str())));
    });
  }
  if (name == "title") {
    return Method(self, "title", [](Interpreter&, const Value& s, Args&) -> R {
      return Value::String(JsTitle(s.str()));
    });
  }
  if (name == "capitalize") {
    return Method(self, "capitalize", [](Interpreter&, const Value& s, Args&) -> R {
      return Value::String(JsCapitalize(s.str()));
    });
  }
  if (name == "startswith" || name == "endswith") {
    const bool prefix = name == "startswith";
    return Method(self, std::string(name), [prefix](Interpreter&, const Value& s, Args& args) -> R {
      return StringAffix(s.str(), args, prefix);
    });
  }
  if (name == "split") {
    return Method(self, "split", [](Interpreter& interp, const Value& s, Args& args) -> R {
      return StringSplit(interp, s.str(), args);
    });
  }
  if (name == "replace") {
    return Method(self, "replace", [](Interpreter& interp, const Value& s, Args& args) -> R {
      return StringReplace(interp, s.str(), args);
    });
  }
  // Baton extensions (Python str methods the reference lacks).
  if (name == "find" || name == "count") {
    const bool find = name == "find";
    return Method(self, std::string(name), [find](Interpreter&, const Value& s, Args& args) -> R {
      if (args.empty() || !args[0].IsString()) {
        return Error(StrCat(find ? "find" : "count", "() needs a string argument"));
      }
      const std::string& sub = args[0].str();
      if (find) {
        size_t hit = s.str().find(sub);
        if (hit == std::string::npos) return Value::Integer(-1);
        return Value::Integer(
            static_cast<double>(CodePoints(std::string_view(s.str()).substr(0, hit)).size()));
      }
      if (sub.empty()) return Value::Integer(static_cast<double>(CodePoints(s.str()).size() + 1));
      double n = 0;
      for (size_t pos = s.str().find(sub); pos != std::string::npos;
           pos = s.str().find(sub, pos + sub.size()))
        ++n;
      return Value::Integer(n);
    });
  }
  if (name == "join") {
    return Method(self, "join", [](Interpreter& interp, const Value& s, Args& args) -> R {
      if (args.empty() || !args[0].IsArrayLike()) return Error("join() needs a list argument");
      std::string out;
      bool first = true;
      for (const Value& item : args[0].array().items) {
        if (!item.IsString()) {
          return Error(StrCat("join() items must be strings, got ", KindName(item.kind())));
        }
        if (!first) out += s.str();
        first = false;
        out += item.str();
        BATON_RETURN_IF_ERROR(interp.CheckSize(out.size()));
      }
      return Value::String(std::move(out));
    });
  }
  if (name == "format") {
    return Method(self, "format", [](Interpreter& interp, const Value& s, Args& args) -> R {
      return StringFormat(interp, s.str(), args);
    });
  }
  return std::nullopt;
}

absl::StatusOr<Value> DictSort(const Value& self, const Args& args) {
  const ObjectData* kwargs = nullptr;
  Args positional;
  for (const Value& arg : args) {
    if (arg.is(ValueKind::kKwargs)) {
      kwargs = &arg.object();
    } else {
      positional.push_back(arg);
    }
  }
  auto option = [&](size_t index, std::string_view key, Value fallback) {
    if (index < positional.size()) return positional[index];
    if (kwargs != nullptr) {
      if (const Value* v = kwargs->Find(key)) return *v;
    }
    return fallback;
  };
  Value case_sensitive = option(0, "case_sensitive", Value::Bool(false));
  if (!case_sensitive.is(ValueKind::kBool)) return Error("case_sensitive must be a boolean");
  Value by = option(1, "by", Value::String("key"));
  if (!by.IsString()) return Error("by must be a string");
  if (by.str() != "key" && by.str() != "value") return Error("by must be either 'key' or 'value'");
  Value reverse = option(2, "reverse", Value::Bool(false));
  if (!reverse.is(ValueKind::kBool)) return Error("reverse must be a boolean");

  std::vector<Value> items;
  for (const auto& [key, value] : self.object().entries()) {
    items.push_back(Value::Array({Value::String(key), value}));
  }
  const size_t index = by.str() == "key" ? 0 : 1;
  // Check comparability first: std::stable_sort needs a comparator that cannot fail.
  for (size_t i = 1; i < items.size(); ++i) {
    BATON_RETURN_IF_ERROR(CompareValues(items[i - 1].array().items[index],
                                        items[i].array().items[index], case_sensitive.boolean())
                              .status());
  }
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    int order =
        CompareValues(a.array().items[index], b.array().items[index], case_sensitive.boolean())
            .value_or(0);
    return reverse.boolean() ? order > 0 : order < 0;
  });
  return Value::Array(std::move(items));
}

Value ObjectItems(const Value& self) {
  std::vector<Value> items;
  for (const auto& [key, value] : self.object().entries()) {
    items.push_back(Value::Array({Value::String(key), value}));
  }
  return Value::Array(std::move(items));
}

std::optional<Value> ObjectBuiltin(const Value& self, std::string_view name) {
  using R = absl::StatusOr<Value>;
  if (name == "get") {
    return Method(self, "get", [](Interpreter&, const Value& d, Args& args) -> R {
      if (args.empty() || !args[0].IsString()) {
        return Error(StrCat("Object key must be a string: got ",
                            args.empty() ? "nothing" : KindName(args[0].kind())));
      }
      if (const Value* v = d.object().Find(args[0].str())) return *v;
      if (args.size() > 1) return args[1];
      return Value::Null();
    });
  }
  if (name == "items") {
    return Method(self, "items", [](Interpreter& interp, const Value& d, Args&) -> R {
      BATON_RETURN_IF_ERROR(interp.Charge(d.object().size()));
      return ObjectItems(d);
    });
  }
  if (name == "keys" || name == "values") {
    const bool keys = name == "keys";
    return Method(self, std::string(name), [keys](Interpreter& interp, const Value& d, Args&) -> R {
      BATON_RETURN_IF_ERROR(interp.Charge(d.object().size()));
      std::vector<Value> out;
      for (const auto& [key, value] : d.object().entries()) {
        out.push_back(keys ? Value::String(key) : value);
      }
      return Value::Array(std::move(out));
    });
  }
  if (name == "dictsort") {
    return Method(self, "dictsort", [](Interpreter& interp, const Value& d, Args& args) -> R {
      BATON_RETURN_IF_ERROR(interp.Charge(d.object().size()));
      return DictSort(d, args);
    });
  }
  return std::nullopt;
}

}  // namespace

std::optional<Value> LookupBuiltin(const Value& object, std::string_view name) {
  if (object.IsString()) return StringBuiltin(object, name);
  if (object.IsObjectLike()) return ObjectBuiltin(object, name);
  if (object.IsArrayLike()) {
    if (name == "length") return Value::Integer(static_cast<double>(object.array().items.size()));
    if (name == "append") {
      // Baton extension: Python's list.append, for templates that accumulate in a list.
      return Method(
          object, "append",
          [](Interpreter& interp, const Value& list, Args& args) -> absl::StatusOr<Value> {
            if (args.size() != 1) return Error("append() takes exactly one argument");
            BATON_RETURN_IF_ERROR(interp.Charge(1));
            list.array().items.push_back(args[0]);
            interp.RegisterMutable(list);
            return Value::Null();
          });
    }
  }
  return std::nullopt;
}

}  // namespace baton::templating::jinja
