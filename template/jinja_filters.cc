// Filters. ApplyBareFilter and ApplyCallFilter follow applyFilter() in runtime.ts branch by
// branch (the same filter name means different things per operand type there). Every
// place where the reference throws falls through to ApplyExtensionFilter, which adds only
// Jinja filters (and operand types) it lacks, with Python Jinja's results; anything else
// stays an error naming the filter, so that no template renders differently from the
// reference where the reference renders at all.
#include <algorithm>
#include <cmath>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "common/strings.h"
#include "template/jinja_builtins.h"
#include "template/jinja_interpreter.h"
#include "template/jinja_strings.h"

namespace baton::templating::jinja {
namespace {

using EvaluatedArgs = Interpreter::EvaluatedArgs;

absl::Status Error(std::string_view message) {
  return absl::InvalidArgumentError(std::string(message));
}

// One element of Array.prototype.join over raw values: null and undefined are empty.
absl::StatusOr<std::string> JoinPiece(const Value& v, size_t max_bytes) {
  if (v.IsNull() || v.IsUndefined()) return std::string();
  return ToJsString(v, max_bytes);
}

// Sorts `items` by `keys` with compareRuntimeValues(); fails (as JavaScript's sort would)
// when two keys cannot be compared.
absl::StatusOr<Value> SortByKeys(std::vector<Value> items, std::vector<Value> keys, bool reverse,
                                 bool case_sensitive) {
  if (!case_sensitive) {
    for (Value& key : keys) {
      if (key.IsString()) key = Value::String(JsToLower(key.str()));
    }
  }
  for (size_t i = 1; i < keys.size(); ++i) {
    BATON_RETURN_IF_ERROR(CompareValues(keys[i - 1], keys[i], true).status());
  }
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    int c = CompareValues(keys[a], keys[b], true).value_or(0);
    return reverse ? c > 0 : c < 0;
  });
  std::vector<Value> sorted;
  sorted.reserve(items.size());
  for (size_t i : order) sorted.push_back(items[i]);
  return Value::Array(std::move(sorted));
}

}  // namespace

absl::StatusOr<Value> Interpreter::ApplyFilter(const Value& operand, const Node& filter,
                                               const EnvPtr& env) {
  if (filter.kind == NodeKind::kIdentifier) {
    return ApplyBareFilter(operand, As<Identifier>(filter).name);
  }
  if (filter.kind == NodeKind::kCall && As<Call>(filter).callee->kind == NodeKind::kIdentifier) {
    const auto& call = As<Call>(filter);
    BATON_ASSIGN_OR_RETURN(EvaluatedArgs args, EvaluateArguments(call.args, env));
    return ApplyCallFilter(operand, As<Identifier>(*call.callee).name, args);
  }
  return RuntimeError("filter must be a name or a call of a name");
}

absl::StatusOr<Value> Interpreter::ApplyBareFilter(const Value& operand, std::string_view name) {
  if (name == "safe") return operand;
  if (name == "tojson") {
    std::string out;
    JsonOptions options;
    options.max_bytes = limits_.max_output_bytes;
    BATON_RETURN_IF_ERROR(AppendJson(operand, options, /*undefined_to_null=*/true, &out));
    return MakeString(std::move(out));
  }
  if (operand.IsArrayLike()) {
    const std::vector<Value>& items = operand.array().items;
    if (name == "list") return operand;
    // The reference hands back JavaScript's undefined for an empty list, which fails as
    // soon as anything uses it; an error is the faithful answer.
    if ((name == "first" || name == "last") && items.empty()) {
      return Error(StrCat("filter '", name, "' of an empty list"));
    }
    if (name == "first") return items.front();
    if (name == "last") return items.back();
    if (name == "length") return Value::Integer(static_cast<double>(items.size()));
    if (name == "reverse") {
      BATON_RETURN_IF_ERROR(Charge(items.size()));
      return Value::Array(std::vector<Value>(items.rbegin(), items.rend()));
    }
    if (name == "sort") {
      BATON_RETURN_IF_ERROR(Charge(items.size()));
      return SortByKeys(items, items, /*reverse=*/false, /*case_sensitive=*/false);
    }
    if (name == "join") {
      BATON_RETURN_IF_ERROR(Charge(items.size()));
      std::string out;
      for (const Value& item : items) {
        BATON_ASSIGN_OR_RETURN(std::string piece, JoinPiece(item, limits_.max_output_bytes));
        out += piece;
        BATON_RETURN_IF_ERROR(CheckSize(out.size()));
      }
      return Value::String(std::move(out));
    }
    if (name == "string") {
      std::string out;
      JsonOptions options;
      options.max_bytes = limits_.max_output_bytes;
      BATON_RETURN_IF_ERROR(AppendJson(operand, options, /*undefined_to_null=*/false, &out));
      return MakeString(std::move(out));
    }
    if (name == "unique") {
      BATON_RETURN_IF_ERROR(Charge(items.size()));
      absl::flat_hash_set<std::string> seen;
      std::vector<Value> out;
      for (const Value& item : items) {
        if (seen.insert(SameValueKey(item)).second) out.push_back(item);
      }
      return Value::Array(std::move(out));
    }
  } else if (operand.IsString()) {
    const std::string& s = operand.str();
    if (name == "length") return Value::Integer(static_cast<double>(Utf16Length(s)));
    if (name == "upper") return Value::String(JsToUpper(s));
    if (name == "lower") return Value::String(JsToLower(s));
    if (name == "title") return Value::String(JsTitle(s));
    if (name == "capitalize") return Value::String(JsCapitalize(s));
    if (name == "trim") return Value::String(std::string(JsTrim(s)));
    if (name == "indent") {
      std::vector<std::string_view> lines = SplitOn(s, "\n");
      std::string out;
      for (size_t i = 0; i < lines.size(); ++i) {
        if (i > 0) out.push_back('\n');
        if (i > 0 && !lines[i].empty()) out += "    ";
        out.append(lines[i]);
      }
      return MakeString(std::move(out));
    }
    if (name == "join" || name == "string") return operand;
    if (name == "int") {
      double v = JsParseInt(s);
      return Value::Integer(std::isnan(v) ? 0 : v);
    }
    if (name == "float") {
      double v = JsParseFloat(s);
      return Value::Float(std::isnan(v) ? 0 : v);
    }
  } else if (operand.IsNumber()) {
    if (name == "abs") {
      double v = std::fabs(operand.number());
      return operand.is(ValueKind::kInteger) ? Value::Integer(v) : Value::Float(v);
    }
    if (name == "int") return Value::Integer(std::floor(operand.number()));
    if (name == "float") return Value::Float(operand.number());
    if (name == "string")
      return Value::String(ToDisplayString(operand, limits_.max_output_bytes).value_or(""));
  } else if (operand.IsObjectLike()) {
    if (name == "items") {
      BATON_RETURN_IF_ERROR(Charge(operand.object().size()));
      std::vector<Value> out;
      for (const auto& [key, value] : operand.object().entries()) {
        out.push_back(Value::Array({Value::String(key), value}));
      }
      return Value::Array(std::move(out));
    }
    if (name == "length") return Value::Integer(static_cast<double>(operand.object().size()));
    if (std::optional<Value> builtin = LookupBuiltin(operand, name)) {
      if (!builtin->is(ValueKind::kFunction)) return *builtin;
      Args none;
      return CallFunction(*builtin, none, nullptr);
    }
  } else if (operand.is(ValueKind::kBool)) {
    const bool b = operand.boolean();
    if (name == "bool") return operand;
    if (name == "int") return Value::Integer(b ? 1 : 0);
    if (name == "float") return Value::Float(b ? 1 : 0);
    if (name == "string") return Value::String(b ? "true" : "false");
  }
  return ApplyExtensionFilter(operand, name, nullptr);
}

absl::StatusOr<Value> Interpreter::ApplyCallFilter(const Value& operand, std::string_view name,
                                                   EvaluatedArgs& args) {
  const ObjectData& kwargs = *args.keywords;
  if (name == "tojson") {
    JsonOptions options;
    options.max_bytes = limits_.max_output_bytes;
    if (const Value* indent = kwargs.Find("indent")) {
      if (!indent->is(ValueKind::kInteger) && !indent->IsNull()) {
        return Error("If set, indent must be a number");
      }
      if (indent->is(ValueKind::kInteger)) options.indent = indent->number();
    }
    if (const Value* ascii = kwargs.Find("ensure_ascii")) {
      if (!ascii->is(ValueKind::kBool)) return Error("If set, ensure_ascii must be a boolean");
      options.ensure_ascii = ascii->boolean();
    }
    if (const Value* sort = kwargs.Find("sort_keys")) {
      if (!sort->is(ValueKind::kBool)) return Error("If set, sort_keys must be a boolean");
      options.sort_keys = sort->boolean();
    }
    if (const Value* separators = kwargs.Find("separators")) {
      if (separators->IsArrayLike()) {
        const auto& parts = separators->array().items;
        if (parts.size() != 2 || !parts[0].IsString() || !parts[1].IsString()) {
          return Error("separators must be a tuple of two strings");
        }
        options.separators = std::make_pair(parts[0].str(), parts[1].str());
      } else if (!separators->IsNull()) {
        return Error("If set, separators must be a tuple of two strings");
      }
    }
    std::string out;
    BATON_RETURN_IF_ERROR(AppendJson(operand, options, /*undefined_to_null=*/true, &out));
    return MakeString(std::move(out));
  }
  if (name == "join" && (operand.IsString() || operand.IsArrayLike())) {
    std::vector<std::string> pieces;
    if (operand.IsString()) {
      for (std::string_view c : CodePoints(operand.str())) pieces.emplace_back(c);
    } else {
      for (const Value& item : operand.array().items) {
        BATON_ASSIGN_OR_RETURN(std::string piece, JoinPiece(item, limits_.max_output_bytes));
        pieces.push_back(std::move(piece));
      }
    }
    BATON_RETURN_IF_ERROR(Charge(pieces.size()));
    Value separator = args.Get(0, "separator").value_or(Value::String(""));
    if (!separator.IsString()) return Error("separator must be a string");
    size_t total = 0;
    for (const std::string& p : pieces) total += p.size() + separator.str().size();
    BATON_RETURN_IF_ERROR(CheckSize(total));
    return Value::String(absl::StrJoin(pieces, separator.str()));
  }
  if ((name == "int" || name == "float") &&
      (operand.IsString() || operand.IsNumber() || operand.is(ValueKind::kBool))) {
    const bool is_int = name == "int";
    Value fallback = args.Get(0, "default").value_or(is_int ? Value::Integer(0) : Value::Float(0));
    if (operand.IsString()) {
      double v = is_int ? JsParseInt(operand.str()) : JsParseFloat(operand.str());
      if (std::isnan(v)) return fallback;
      return is_int ? Value::Integer(v) : Value::Float(v);
    }
    if (operand.IsNumber()) return operand;
    return is_int ? Value::Integer(operand.boolean() ? 1 : 0)
                  : Value::Float(operand.boolean() ? 1 : 0);
  }
  if (name == "default") {
    Value fallback = args.positional.size() > 0 ? args.positional[0] : Value::String("");
    Value boolean = args.Get(1, "boolean").value_or(Value::Bool(false));
    if (!boolean.is(ValueKind::kBool)) return Error("`default` filter flag must be a boolean");
    if (operand.IsUndefined() || (boolean.boolean() && !Truthy(operand))) return fallback;
    return operand;
  }

  if (operand.IsArrayLike()) {
    const std::vector<Value>& items = operand.array().items;
    if (name == "sort") {
      Value reverse = args.Get(0, "reverse").value_or(Value::Bool(false));
      if (!reverse.is(ValueKind::kBool)) return Error("reverse must be a boolean");
      Value case_sensitive = args.Get(1, "case_sensitive").value_or(Value::Bool(false));
      if (!case_sensitive.is(ValueKind::kBool)) return Error("case_sensitive must be a boolean");
      Value attribute = args.Get(2, "attribute").value_or(Value::Null());
      if (!attribute.IsString() && !attribute.is(ValueKind::kInteger) && !attribute.IsNull()) {
        return Error("attribute must be a string, integer, or null");
      }
      BATON_RETURN_IF_ERROR(Charge(items.size()));
      std::vector<Value> keys = items;
      if (!attribute.IsNull()) {
        const std::string path =
            attribute.IsString() ? attribute.str() : JsNumberToString(attribute.number());
        for (Value& key : keys) key = AttributePath(key, path);
      }
      return SortByKeys(items, std::move(keys), reverse.boolean(), case_sensitive.boolean());
    }
    if (name == "selectattr" || name == "rejectattr") {
      const bool select = name == "selectattr";
      for (const Value& item : items) {
        if (!item.IsAttributeContainer()) {
          return Error(StrCat("`", name, "` can only be applied to array of objects"));
        }
      }
      // The reference accepts only string literals as arguments; Baton accepts any
      // expression that evaluates to the same.
      if (args.positional.empty()) return Error(StrCat("`", name, "` needs an attribute name"));
      const Value& attr = args.positional[0];
      std::optional<std::string> test_name;
      if (args.positional.size() > 1) {
        if (!args.positional[1].IsString()) return Error("test name must be a string");
        test_name = args.positional[1].str();
      }
      Args test_args(args.positional.begin() +
                         std::min<ptrdiff_t>(2, static_cast<ptrdiff_t>(args.positional.size())),
                     args.positional.end());
      BATON_RETURN_IF_ERROR(Charge(items.size()));
      std::vector<Value> out;
      for (const Value& item : items) {
        const Value* a = attr.IsString() ? item.object().Find(attr.str()) : nullptr;
        bool result = false;
        if (a != nullptr) {
          if (test_name) {
            BATON_ASSIGN_OR_RETURN(result, RunTest(*test_name, *a, test_args));
          } else {
            result = Truthy(*a);
          }
        }
        if (result == select) out.push_back(item);
      }
      return Value::Array(std::move(out));
    }
    if (name == "map" && kwargs.Find("attribute") != nullptr) {
      const Value& attr = *kwargs.Find("attribute");
      if (!attr.IsString()) return Error("attribute must be a string");
      const Value* fallback = kwargs.Find("default");
      BATON_RETURN_IF_ERROR(Charge(items.size()));
      std::vector<Value> out;
      for (const Value& item : items) {
        if (!item.IsAttributeContainer()) return Error("items in map must be an object");
        Value v = AttributePath(item, attr.str());
        out.push_back(v.IsUndefined() && fallback != nullptr ? *fallback : v);
      }
      return Value::Array(std::move(out));
    }
  } else if (operand.IsString()) {
    if (name == "indent") {
      Value width = args.Get(0, "width").value_or(Value::Integer(4));
      if (!width.is(ValueKind::kInteger)) return Error("width must be a number");
      const bool first = JsTruthy(args.Get(1, "first").value_or(Value::Bool(false)));
      const bool blank = JsTruthy(args.Get(2, "blank").value_or(Value::Bool(false)));
      const double w = width.number();
      if (w < 0 || !std::isfinite(w)) return Error("Invalid count value for indent width");
      std::vector<std::string_view> lines = SplitOn(operand.str(), "\n");
      auto indented = [&](size_t i) { return (first || i > 0) && (blank || !lines[i].empty()); };
      double padded = 0;
      for (size_t i = 0; i < lines.size(); ++i) padded += indented(i) ? 1 : 0;
      BATON_RETURN_IF_ERROR(CheckSize(static_cast<size_t>(
          std::min(static_cast<double>(operand.str().size()) + w * padded, 1e18))));
      const std::string pad(static_cast<size_t>(w), ' ');
      std::string out;
      for (size_t i = 0; i < lines.size(); ++i) {
        if (i > 0) out.push_back('\n');
        if (indented(i)) out += pad;
        out.append(lines[i]);
      }
      return MakeString(std::move(out));
    }
    if (name == "replace") {
      Args replace_args = args.positional;
      replace_args.push_back(Value::Object(args.keywords, ValueKind::kKwargs));
      std::optional<Value> fn = LookupBuiltin(operand, "replace");
      return CallFunction(*fn, replace_args, nullptr);
    }
  } else if (operand.IsObjectLike()) {
    std::optional<Value> builtin = LookupBuiltin(operand, name);
    if (builtin && builtin->is(ValueKind::kFunction)) {
      Args call_args = args.positional;
      if (kwargs.size() > 0) call_args.push_back(Value::Object(args.keywords, ValueKind::kKwargs));
      return CallFunction(*builtin, call_args, nullptr);
    }
  }
  return ApplyExtensionFilter(operand, name, &args);
}

}  // namespace baton::templating::jinja
