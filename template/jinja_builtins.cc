#include "template/jinja_builtins.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/cord.h"
#include "common/status.h"
#include "common/strings.h"
#include "template/jinja_strings.h"

namespace baton::templating::jinja {
namespace {

absl::Status Error(std::string_view message) {
  return absl::InvalidArgumentError(std::string(message));
}

absl::StatusOr<double> RangeNumber(const Value& v) {
  if (v.IsNumber() || v.is(ValueKind::kBool)) return v.number();
  return Error(StrCat("range() arguments must be numbers, got ", KindName(v.kind())));
}

absl::StatusOr<Value> Range(Interpreter& interp, const Args& args) {
  // utils.ts range(start, stop?, step = 1) on the raw values.
  double start = 0, stop = 0, step = 1;
  if (args.empty()) return Value::Array({});
  if (args.size() == 1) {
    BATON_ASSIGN_OR_RETURN(stop, RangeNumber(args[0]));
  } else {
    BATON_ASSIGN_OR_RETURN(start, RangeNumber(args[0]));
    BATON_ASSIGN_OR_RETURN(stop, RangeNumber(args[1]));
    if (args.size() > 2) {
      BATON_ASSIGN_OR_RETURN(step, RangeNumber(args[2]));
    }
  }
  if (step == 0) return Error("range() step must not be zero");
  const double count = std::ceil((stop - start) / step);
  if (!(count > 0)) return Value::Array({});
  const double budget = static_cast<double>(interp.limits().max_loop_iterations);
  BATON_RETURN_IF_ERROR(interp.Charge(static_cast<size_t>(std::min(count, budget + 1))));
  // Repeated addition, as utils.ts does, so that fractional steps give the same values.
  std::vector<Value> out;
  for (double i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (static_cast<double>(out.size()) > count || i + step == i) {
      return Error("range() step is too small to make progress");
    }
    out.push_back(Value::Number(i));
  }
  return Value::Array(std::move(out));
}

absl::StatusOr<Value> MakeNamespace(const Args& args) {
  Args positional = args;
  const ObjectData* kwargs = nullptr;
  Value kwargs_holder;
  if (!positional.empty() && positional.back().is(ValueKind::kKwargs)) {
    kwargs_holder = positional.back();
    kwargs = &kwargs_holder.object();
    positional.pop_back();
  }
  if (positional.size() > 1) {
    return Error(StrCat("namespace expected at most 1 argument, got ", positional.size()));
  }
  auto entries = std::make_shared<ObjectData>();
  if (positional.size() == 1) {
    const Value& source = positional[0];
    if (source.IsObjectLike()) {
      for (const auto& [key, value] : source.object().entries()) entries->Set(key, value);
    } else if (source.IsArrayLike()) {
      for (const Value& pair : source.array().items) {
        std::vector<Value> kv;
        if (pair.IsArrayLike()) {
          kv = pair.array().items;
        } else if (pair.IsString()) {
          for (std::string_view c : CodePoints(pair.str()))
            kv.push_back(Value::String(std::string(c)));
        }
        if (kv.size() != 2) {
          return Error("namespace expected an object or an iterable of [key, value] pairs");
        }
        if (!kv[0].IsString()) return Error("namespace keys must be strings");
        entries->Set(kv[0].str(), kv[1]);
      }
    } else {
      return Error(StrCat("'", KindName(source.kind()), "' object is not iterable"));
    }
  }
  if (kwargs != nullptr) {
    for (const auto& [key, value] : kwargs->entries()) entries->Set(key, value);
  }
  return Value::Object(std::move(entries), ValueKind::kNamespace);
}

}  // namespace

Value MakeFunction(std::string name, NativeFn fn) {
  return Value::Function(std::make_shared<FunctionData>(std::move(name), std::move(fn)));
}

bool IsGlobalName(std::string_view name) {
  static constexpr std::string_view kNames[] = {"namespace",       "false", "true",         "none",
                                                "raise_exception", "range", "strftime_now", "True",
                                                "False",           "None"};
  return std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames);
}

void SetupGlobals(Env& env) {
  env.Set("namespace", MakeFunction("namespace", [](Interpreter&, Args& args, const EnvPtr&) {
            return MakeNamespace(args);
          }));
  env.Set("false", Value::Bool(false));
  env.Set("true", Value::Bool(true));
  env.Set("none", Value::Null());
  env.Set("raise_exception",
          MakeFunction("raise_exception",
                       [](Interpreter&, Args& args, const EnvPtr&) -> absl::StatusOr<Value> {
                         // new Error(value): the message is String(value), or "" for undefined.
                         std::string message;
                         if (!args.empty() && !args[0].IsUndefined()) {
                           message = ToJsString(args[0]).value_or("");
                         }
                         absl::Status status = absl::InvalidArgumentError(message);
                         status.SetPayload(kRaisedPayload, absl::Cord("1"));
                         status.SetPayload(kLocatedPayload, absl::Cord("1"));
                         return status;
                       }));
  env.Set("range", MakeFunction("range", [](Interpreter& interp, Args& args, const EnvPtr&) {
            return Range(interp, args);
          }));
  env.Set("strftime_now",
          MakeFunction("strftime_now",
                       [](Interpreter& interp, Args& args, const EnvPtr&) -> absl::StatusOr<Value> {
                         if (args.empty() || !args[0].IsString()) {
                           return Error("strftime_now() expects a format string");
                         }
                         return Value::String(JsStrftime(args[0].str(), interp.now()));
                       }));
  env.Set("True", Value::Bool(true));
  env.Set("False", Value::Bool(false));
  env.Set("None", Value::Null());
}

absl::StatusOr<bool> Contains(const Value& container, const Value& item) {
  if (container.IsArrayLike()) {
    const auto& items = container.array().items;
    return std::any_of(items.begin(), items.end(),
                       [&](const Value& x) { return StrictEquals(x, item); });
  }
  if (container.IsString() && item.IsString())
    return container.str().find(item.str()) != std::string::npos;
  if (container.IsObjectLike() && item.IsString())
    return container.object().Find(item.str()) != nullptr;
  return Error(StrCat("cannot test membership of ", KindName(item.kind()), " in ",
                      KindName(container.kind())));
}

std::optional<std::vector<Value>> IterableItems(const Value& v) {
  if (v.IsArrayLike()) return v.array().items;
  if (v.IsObjectLike()) {
    std::vector<Value> keys;
    for (const auto& [key, value] : v.object().entries()) keys.push_back(Value::String(key));
    return keys;
  }
  return std::nullopt;
}

absl::StatusOr<bool> RunTest(std::string_view name, const Value& operand, const Args& args) {
  const ValueKind kind = operand.kind();
  auto need_arg = [&]() -> absl::Status {
    if (args.empty()) return Error(StrCat("test '", name, "' needs an argument"));
    return absl::OkStatus();
  };
  if (name == "boolean") return kind == ValueKind::kBool;
  if (name == "callable") return kind == ValueKind::kFunction;
  if (name == "odd" || name == "even") {
    if (kind != ValueKind::kInteger) {
      return Error(StrCat("cannot ", name, " on ", KindName(kind)));
    }
    const bool odd = std::fmod(operand.number(), 2) != 0;
    return name == "odd" ? odd : !odd;
  }
  if (name == "false") return kind == ValueKind::kBool && !operand.boolean();
  if (name == "true") return kind == ValueKind::kBool && operand.boolean();
  if (name == "none") return kind == ValueKind::kNull;
  if (name == "string") return kind == ValueKind::kString;
  if (name == "number") return operand.IsNumber();
  if (name == "integer") return kind == ValueKind::kInteger;
  // As in the reference: only lists and strings (not dicts, not tuples) are iterable.
  if (name == "iterable") return kind == ValueKind::kArray || kind == ValueKind::kString;
  if (name == "mapping") return operand.IsObjectLike();
  if (name == "sequence")
    return operand.IsArrayLike() || operand.IsObjectLike() || operand.IsString();
  if (name == "lower") return operand.IsString() && operand.str() == JsToLower(operand.str());
  if (name == "upper") return operand.IsString() && operand.str() == JsToUpper(operand.str());
  if (name == "defined") return kind != ValueKind::kUndefined;
  if (name == "undefined") return kind == ValueKind::kUndefined;
  if (name == "equalto" || name == "eq" || name == "==") {
    BATON_RETURN_IF_ERROR(need_arg());
    return StrictEquals(operand, args[0]);
  }
  // Baton extensions (tests the reference lacks, or that need an argument).
  if (name == "float") return kind == ValueKind::kFloat;
  if (name == "sameas") {
    BATON_RETURN_IF_ERROR(need_arg());
    return StrictEquals(operand, args[0]);
  }
  if (name == "ne" || name == "!=") {
    BATON_RETURN_IF_ERROR(need_arg());
    return !StrictEquals(operand, args[0]);
  }
  if (name == "divisibleby") {
    BATON_RETURN_IF_ERROR(need_arg());
    if (!operand.IsNumber() || !args[0].IsNumber()) return Error("divisibleby needs numbers");
    if (args[0].number() == 0) return Error("divisibleby(0)");
    return std::fmod(operand.number(), args[0].number()) == 0;
  }
  if (name == "lt" || name == "<" || name == "le" || name == "<=" || name == "gt" || name == ">" ||
      name == "ge" || name == ">=") {
    BATON_RETURN_IF_ERROR(need_arg());
    BATON_ASSIGN_OR_RETURN(int order, CompareValues(operand, args[0], /*case_sensitive=*/true));
    if (name == "lt" || name == "<") return order < 0;
    if (name == "le" || name == "<=") return order <= 0;
    if (name == "gt" || name == ">") return order > 0;
    return order >= 0;
  }
  if (name == "in") {
    BATON_RETURN_IF_ERROR(need_arg());
    return Contains(args[0], operand);
  }
  return Error(StrCat("unsupported test '", name, "'"));
}

}  // namespace baton::templating::jinja
