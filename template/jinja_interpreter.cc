#include "template/jinja_interpreter.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/strings/cord.h"
#include "common/status.h"
#include "common/strings.h"
#include "template/jinja_builtins.h"

namespace baton::templating::jinja {
namespace {

constexpr char kControlPayload[] = "baton.jinja/control";

// `break` and `continue` unwind like exceptions in runtime.ts (a break inside a macro
// called from a loop ends that loop), so they travel as statuses.
absl::Status ControlSignal(std::string_view which) {
  absl::Status status(absl::StatusCode::kAborted, Av(which));
  status.SetPayload(kControlPayload, absl::Cord(Av(which)));
  return status;
}

bool IsControl(const absl::Status& status, std::string_view which) {
  auto payload = status.GetPayload(kControlPayload);
  return payload.has_value() && *payload == Av(which);
}

bool IsAnyControl(const absl::Status& status) {
  return status.GetPayload(kControlPayload).has_value();
}

absl::Status Locate(const absl::Status& status, int line) {
  if (status.GetPayload(kLocatedPayload).has_value() || IsAnyControl(status)) return status;
  absl::Status located(status.code(), StrCat(status.message(), " at line ", line));
  status.ForEachPayload(
      [&](absl::string_view url, const absl::Cord& payload) { located.SetPayload(url, payload); });
  located.SetPayload(kLocatedPayload, absl::Cord("1"));
  return located;
}

bool IsNumericLike(const Value& v) { return v.IsNumber() || v.is(ValueKind::kBool); }

// Python-style slice of `length` items as utils.ts computes it; calls `take(i)` for each
// index in order.
template <typename F>
void SliceIndices(double length, std::optional<double> start, std::optional<double> stop,
                  std::optional<double> step_opt, F&& take) {
  const double step = step_opt.value_or(1);
  if (std::isnan(step) || (start && std::isnan(*start)) || (stop && std::isnan(*stop))) return;
  const double direction = step > 0 ? 1 : (step < 0 ? -1 : 0);
  double from, to;
  if (direction >= 0) {
    from = start.value_or(0);
    from = from < 0 ? std::max(length + from, 0.0) : std::min(from, length);
    to = stop.value_or(length);
    to = to < 0 ? std::max(length + to, 0.0) : std::min(to, length);
  } else {
    from = start.value_or(length - 1);
    from = from < 0 ? std::max(length + from, -1.0) : std::min(from, length - 1);
    to = stop.value_or(-1);
    to = to < -1 ? std::max(length + to, -1.0) : std::min(to, length - 1);
  }
  if (direction == 0) return;
  for (double i = from; direction * i < direction * to; i += step) take(static_cast<size_t>(i));
}

}  // namespace

absl::Status RuntimeError(std::string_view message) {
  return absl::InvalidArgumentError(std::string(message));
}

Env::~Env() {
  std::vector<Value> values;
  values.reserve(vars_.size());
  for (auto& [name, value] : vars_) values.push_back(std::move(value));
  vars_.clear();
  ReleaseDeferred(&values);
}

Value Env::Lookup(std::string_view name) const {
  for (const Env* env = this; env != nullptr; env = env->parent_.get()) {
    auto it = env->vars_.find(Av(name));
    if (it != env->vars_.end()) return it->second;
  }
  return Value();
}

void Env::Set(std::string_view name, Value value) { vars_[Av(name)] = std::move(value); }

Interpreter::~Interpreter() {
  for (Value& v : mutated_) {
    if (v.IsAttributeContainer()) {
      v.object().Clear();
    } else if (v.IsArrayLike()) {
      ReleaseDeferred(&v.array().items);
    }
  }
  ReleaseDeferred(&mutated_);
}

absl::Status Interpreter::Charge(size_t n) {
  charged_ += n;
  if (charged_ > limits_.max_loop_iterations) {
    return absl::InvalidArgumentError(
        StrCat("exceeded max_loop_iterations (", limits_.max_loop_iterations,
               "): loop iterations, macro calls and items processed by filters count toward it"));
  }
  return absl::OkStatus();
}

absl::Status Interpreter::CheckSize(size_t bytes) const {
  if (bytes > limits_.max_output_bytes) {
    return absl::InvalidArgumentError(StrCat("output exceeds max_output_bytes (",
                                             limits_.max_output_bytes, "): a string of ", bytes,
                                             " bytes"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Value> Interpreter::MakeString(std::string s) const {
  BATON_RETURN_IF_ERROR(CheckSize(s.size()));
  return Value::String(std::move(s));
}

absl::StatusOr<std::string> Interpreter::Run(const Program& program, const EnvPtr& globals) {
  absl::StatusOr<Value> result = Evaluate(program, globals);
  if (!result.ok()) {
    if (IsControl(result.status(), "break") || IsControl(result.status(), "continue")) {
      return absl::InvalidArgumentError(
          StrCat("'", result.status().message(), "' outside of a for loop"));
    }
    return result.status();
  }
  return result->str();
}

absl::StatusOr<Value> Interpreter::Evaluate(const Node& node, const EnvPtr& env) {
  if (eval_depth_ >= kMaxEvaluationDepth || stack_.Exhausted()) {
    return Locate(absl::InvalidArgumentError(
                      StrCat("evaluation nested deeper than ", eval_depth_, " levels (limits: ",
                             kMaxEvaluationDepth, " levels, ", stack_.max_bytes() >> 10,
                             " KiB of stack; max_recursion_depth bounds macro recursion)")),
                  node.line);
  }
  ++eval_depth_;
  absl::StatusOr<Value> result = EvaluateNode(node, env);
  --eval_depth_;
  if (!result.ok()) return Locate(result.status(), node.line);
  return result;
}

absl::StatusOr<Value> Interpreter::CallFunction(const Value& fn, Args& args, const EnvPtr& env) {
  return fn.function().fn(*this, args, env);
}

absl::StatusOr<Value> Interpreter::EvaluateNode(const Node& node, const EnvPtr& env) {
  switch (node.kind) {
    case NodeKind::kProgram:
      return EvalBlock(As<Program>(node).body, env);
    case NodeKind::kSet:
      return EvalSet(As<SetStatement>(node), env);
    case NodeKind::kIf: {
      const auto& n = As<If>(node);
      BATON_ASSIGN_OR_RETURN(Value test, Evaluate(*n.test, env));
      return EvalBlock(Truthy(test) ? n.body : n.alternate, env);
    }
    case NodeKind::kFor:
      return EvalFor(As<For>(node), env);
    case NodeKind::kMacro:
      return EvalMacro(As<Macro>(node), env);
    case NodeKind::kCallStatement:
      return EvalCallStatement(As<CallStatement>(node), env);
    case NodeKind::kBreak:
      return ControlSignal("break");
    case NodeKind::kContinue:
      return ControlSignal("continue");
    case NodeKind::kIntegerLiteral:
      return Value::Integer(As<IntegerLiteral>(node).value);
    case NodeKind::kFloatLiteral:
      return Value::Float(As<FloatLiteral>(node).value);
    case NodeKind::kStringLiteral:
      return Value::String(As<StringLiteral>(node).value);
    case NodeKind::kArrayLiteral:
    case NodeKind::kTupleLiteral: {
      const NodeList& items = node.kind == NodeKind::kArrayLiteral ? As<ArrayLiteral>(node).items
                                                                   : As<TupleLiteral>(node).items;
      std::vector<Value> values;
      values.reserve(items.size());
      for (const NodePtr& item : items) {
        BATON_ASSIGN_OR_RETURN(Value v, Evaluate(*item, env));
        values.push_back(std::move(v));
      }
      return node.kind == NodeKind::kArrayLiteral ? Value::Array(std::move(values))
                                                  : Value::Tuple(std::move(values));
    }
    case NodeKind::kObjectLiteral: {
      auto data = std::make_shared<ObjectData>();
      for (const auto& [key_node, value_node] : As<ObjectLiteral>(node).entries) {
        BATON_ASSIGN_OR_RETURN(Value key, Evaluate(*key_node, env));
        if (!key.IsString()) {
          return RuntimeError(StrCat("Object keys must be strings: got ", KindName(key.kind())));
        }
        BATON_ASSIGN_OR_RETURN(Value value, Evaluate(*value_node, env));
        data->Set(key.str(), std::move(value));
      }
      return Value::Object(std::move(data));
    }
    case NodeKind::kIdentifier:
      return env->Lookup(As<Identifier>(node).name);
    case NodeKind::kCall:
      return EvalCall(As<Call>(node), env);
    case NodeKind::kMember:
      return EvalMember(As<Member>(node), env);
    case NodeKind::kUnary:
      return EvalUnary(As<Unary>(node), env);
    case NodeKind::kBinary:
      return EvalBinary(As<Binary>(node), env);
    case NodeKind::kFilter: {
      const auto& n = As<FilterExpr>(node);
      BATON_ASSIGN_OR_RETURN(Value operand, Evaluate(*n.operand, env));
      return ApplyFilter(operand, *n.filter, env);
    }
    case NodeKind::kFilterStatement: {
      const auto& n = As<FilterStatement>(node);
      BATON_ASSIGN_OR_RETURN(Value rendered, EvalBlock(n.body, env));
      return ApplyFilter(rendered, *n.filter, env);
    }
    case NodeKind::kTest:
      return EvalTest(As<Test>(node), env);
    case NodeKind::kSelect: {
      const auto& n = As<Select>(node);
      BATON_ASSIGN_OR_RETURN(Value predicate, Evaluate(*n.test, env));
      if (!Truthy(predicate)) return Value();
      return Evaluate(*n.lhs, env);
    }
    case NodeKind::kTernary: {
      const auto& n = As<Ternary>(node);
      BATON_ASSIGN_OR_RETURN(Value condition, Evaluate(*n.condition, env));
      return Evaluate(Truthy(condition) ? *n.true_expr : *n.false_expr, env);
    }
    case NodeKind::kComment:
      return Value::Null();
    default:
      return RuntimeError(
          "unexpected syntax in this position (keyword argument, slice or unpacking)");
  }
}

absl::StatusOr<Value> Interpreter::EvalBlock(const NodeList& statements, const EnvPtr& env) {
  std::string result;
  for (const NodePtr& statement : statements) {
    BATON_ASSIGN_OR_RETURN(Value v, Evaluate(*statement, env));
    if (v.IsNull() || v.IsUndefined()) continue;
    if (v.IsString()) {
      result += v.str();
    } else {
      absl::StatusOr<std::string> text = ToDisplayString(v, limits_.max_output_bytes);
      if (!text.ok()) return Locate(text.status(), statement->line);
      result += *text;
    }
    BATON_RETURN_IF_ERROR(CheckSize(result.size()));
  }
  return Value::String(std::move(result));
}

absl::StatusOr<Value> Interpreter::EvalSet(const SetStatement& node, const EnvPtr& env) {
  Value rhs;
  if (node.value) {
    BATON_ASSIGN_OR_RETURN(rhs, Evaluate(*node.value, env));
  } else {
    BATON_ASSIGN_OR_RETURN(rhs, EvalBlock(node.body, env));
  }
  const Node& assignee = *node.assignee;
  if (assignee.kind == NodeKind::kIdentifier) {
    env->Set(As<Identifier>(assignee).name, std::move(rhs));
  } else if (assignee.kind == NodeKind::kTupleLiteral) {
    const NodeList& targets = As<TupleLiteral>(assignee).items;
    if (!rhs.IsArrayLike()) {
      return RuntimeError(StrCat("Cannot unpack non-iterable type in set: ", KindName(rhs.kind())));
    }
    const std::vector<Value>& items = rhs.array().items;
    if (items.size() != targets.size()) {
      return RuntimeError(StrCat("Too ", targets.size() > items.size() ? "few" : "many",
                                 " items to unpack in set"));
    }
    for (size_t i = 0; i < targets.size(); ++i) {
      if (targets[i]->kind != NodeKind::kIdentifier) {
        return RuntimeError("Cannot unpack to non-identifier in set");
      }
      env->Set(As<Identifier>(*targets[i]).name, items[i]);
    }
  } else if (assignee.kind == NodeKind::kMember) {
    const auto& member = As<Member>(assignee);
    BATON_ASSIGN_OR_RETURN(Value object, Evaluate(*member.object, env));
    if (!object.is(ValueKind::kNamespace)) {
      return RuntimeError("cannot assign attribute on non-namespace object");
    }
    if (member.property->kind != NodeKind::kIdentifier) {
      return RuntimeError("Cannot assign to member with non-identifier property");
    }
    object.object().Set(As<Identifier>(*member.property).name, std::move(rhs));
    RegisterMutable(object);
  } else {
    return RuntimeError("Invalid left-hand side of a set statement");
  }
  return Value::Null();
}

absl::StatusOr<Value> Interpreter::EvalFor(const For& node, const EnvPtr& env) {
  auto scope = std::make_shared<Env>(env);
  const Node* test = nullptr;
  Value iterable;
  if (node.iterable->kind == NodeKind::kSelect) {
    const auto& select = As<Select>(*node.iterable);
    BATON_ASSIGN_OR_RETURN(iterable, Evaluate(*select.lhs, scope));
    test = select.test.get();
  } else {
    BATON_ASSIGN_OR_RETURN(iterable, Evaluate(*node.iterable, scope));
  }
  std::optional<std::vector<Value>> source;
  if (iterable.IsArrayLike() || iterable.IsObjectLike()) source = IterableItems(iterable);
  if (!source) {
    return RuntimeError(
        StrCat("Expected iterable or object type in for loop: got ", KindName(iterable.kind())));
  }
  BATON_RETURN_IF_ERROR(Charge(source->size()));

  const Node& loopvar = *node.loopvar;
  auto bind = [&](const EnvPtr& target, const Value& current) -> absl::Status {
    if (loopvar.kind == NodeKind::kIdentifier) {
      target->Set(As<Identifier>(loopvar).name, current);
      return absl::OkStatus();
    }
    const NodeList& names = As<TupleLiteral>(loopvar).items;
    for (size_t j = 0; j < names.size(); ++j) {
      if (names[j]->kind != NodeKind::kIdentifier) {
        return RuntimeError("Cannot unpack non-identifier type in for loop");
      }
      target->Set(As<Identifier>(*names[j]).name, current.array().items[j]);
    }
    return absl::OkStatus();
  };

  std::vector<Value> items;
  for (const Value& current : *source) {
    if (loopvar.kind == NodeKind::kTupleLiteral) {
      // runtime.ts checks for the exact ArrayValue type, so tuples do not unpack.
      if (!current.is(ValueKind::kArray)) {
        return RuntimeError(StrCat("Cannot unpack non-iterable type: ", KindName(current.kind())));
      }
      size_t want = As<TupleLiteral>(loopvar).items.size(), have = current.array().items.size();
      if (want != have) {
        return RuntimeError(StrCat("Too ", want > have ? "few" : "many", " items to unpack"));
      }
    }
    if (test != nullptr) {
      auto loop_scope = std::make_shared<Env>(scope);
      BATON_RETURN_IF_ERROR(bind(loop_scope, current));
      BATON_ASSIGN_OR_RETURN(Value keep, Evaluate(*test, loop_scope));
      if (!Truthy(keep)) continue;
    }
    items.push_back(current);
  }

  std::string result;
  bool no_iteration = true;
  const double length = static_cast<double>(items.size());
  std::shared_ptr<ObjectData> loop;
  for (size_t i = 0; i < items.size(); ++i) {
    // A fresh `loop` object per iteration, as in runtime.ts; the previous one is reused
    // when nothing else kept a reference to it, which no template can observe.
    if (loop == nullptr || loop.use_count() > 2) loop = std::make_shared<ObjectData>();
    const double index = static_cast<double>(i);
    loop->Set("index", Value::Integer(index + 1));
    loop->Set("index0", Value::Integer(index));
    loop->Set("revindex", Value::Integer(length - index));
    loop->Set("revindex0", Value::Integer(length - index - 1));
    loop->Set("first", Value::Bool(i == 0));
    loop->Set("last", Value::Bool(i + 1 == items.size()));
    loop->Set("length", Value::Integer(length));
    loop->Set("previtem", i > 0 ? items[i - 1] : Value());
    loop->Set("nextitem", i + 1 < items.size() ? items[i + 1] : Value());
    scope->Set("loop", Value::Object(loop));
    BATON_RETURN_IF_ERROR(bind(scope, items[i]));
    absl::StatusOr<Value> body = EvalBlock(node.body, scope);
    if (!body.ok()) {
      // As in runtime.ts, the interrupted iteration's output is dropped and does not count
      // as an iteration for the else block.
      if (IsControl(body.status(), "continue")) continue;
      if (IsControl(body.status(), "break")) break;
      return body.status();
    }
    result += body->str();
    BATON_RETURN_IF_ERROR(CheckSize(result.size()));
    no_iteration = false;
  }
  if (no_iteration) {
    BATON_ASSIGN_OR_RETURN(Value otherwise, EvalBlock(node.default_block, scope));
    result += otherwise.str();
    BATON_RETURN_IF_ERROR(CheckSize(result.size()));
  }
  return Value::String(std::move(result));
}

absl::StatusOr<Value> Interpreter::EvalMember(const Member& node, const EnvPtr& env) {
  BATON_ASSIGN_OR_RETURN(Value object, Evaluate(*node.object, env));
  Value property;
  if (node.computed) {
    if (node.property->kind == NodeKind::kSlice) {
      return EvalSlice(object, As<Slice>(*node.property), env);
    }
    BATON_ASSIGN_OR_RETURN(property, Evaluate(*node.property, env));
  } else if (node.property->kind == NodeKind::kIntegerLiteral) {
    property = Value::Integer(As<IntegerLiteral>(*node.property).value);
  } else {
    property = Value::String(As<Identifier>(*node.property).name);
  }

  std::optional<Value> value;
  if (object.IsAttributeContainer()) {
    if (!property.IsString()) {
      return RuntimeError(
          StrCat("Cannot access property with non-string: got ", KindName(property.kind())));
    }
    if (const Value* found = object.object().Find(property.str())) {
      value = *found;
    } else if (object.IsObjectLike()) {
      value = LookupBuiltin(object, property.str());
    }
  } else if (object.IsArrayLike() || object.IsString()) {
    if (property.is(ValueKind::kInteger)) {
      if (object.IsString()) {
        std::optional<std::string> unit = Utf16At(object.str(), property.number());
        if (unit) value = Value::String(*std::move(unit));
      } else {
        const auto& items = object.array().items;
        double index = std::isnan(property.number()) ? 0 : std::trunc(property.number());
        if (index < 0) index += static_cast<double>(items.size());
        if (index >= 0 && index < static_cast<double>(items.size())) {
          value = items[static_cast<size_t>(index)];
        }
      }
    } else if (property.IsString()) {
      value = LookupBuiltin(object, property.str());
    } else {
      return RuntimeError(StrCat("Cannot access property with non-string/non-number: got ",
                                 KindName(property.kind())));
    }
  } else {
    if (!property.IsString()) {
      return RuntimeError(
          StrCat("Cannot access property with non-string: got ", KindName(property.kind())));
    }
    value = LookupBuiltin(object, property.str());
  }
  return value.value_or(Value());
}

absl::StatusOr<Value> Interpreter::EvalSlice(const Value& object, const Slice& node,
                                             const EnvPtr& env) {
  if (!object.IsArrayLike() && !object.IsString()) {
    return RuntimeError("Slice object must be an array or string");
  }
  std::optional<double> bounds[3];
  const Node* parts[3] = {node.start.get(), node.stop.get(), node.step.get()};
  static constexpr std::string_view kNames[3] = {"start", "stop", "step"};
  for (int i = 0; i < 3; ++i) {
    if (parts[i] == nullptr) continue;
    BATON_ASSIGN_OR_RETURN(Value v, Evaluate(*parts[i], env));
    if (v.IsUndefined()) continue;
    if (!v.is(ValueKind::kInteger)) {
      return RuntimeError(StrCat("Slice ", kNames[i], " must be numeric or undefined"));
    }
    bounds[i] = v.number();
  }
  if (object.IsArrayLike()) {
    const auto& items = object.array().items;
    std::vector<Value> out;
    SliceIndices(static_cast<double>(items.size()), bounds[0], bounds[1], bounds[2],
                 [&](size_t i) { out.push_back(items[i]); });
    BATON_RETURN_IF_ERROR(Charge(out.size()));
    return Value::Array(std::move(out));
  }
  std::vector<std::string_view> chars = CodePoints(object.str());
  std::string out;
  SliceIndices(static_cast<double>(chars.size()), bounds[0], bounds[1], bounds[2],
               [&](size_t i) { out.append(chars[i]); });
  return Value::String(std::move(out));
}

absl::StatusOr<Value> Interpreter::EvalUnary(const Unary& node, const EnvPtr& env) {
  BATON_ASSIGN_OR_RETURN(Value argument, Evaluate(*node.argument, env));
  if (node.op == "not") return Value::Bool(!Truthy(argument));
  if (!IsNumericLike(argument)) {
    return RuntimeError(
        StrCat("Unknown operator \"", node.op, "\" for ", KindName(argument.kind())));
  }
  double result = (node.op == "-" ? -1.0 : 1.0) * argument.number();
  return argument.is(ValueKind::kFloat) ? Value::Float(result) : Value::Integer(result);
}

absl::StatusOr<Value> Interpreter::EvalBinary(const Binary& node, const EnvPtr& env) {
  const std::string& op = node.op;
  BATON_ASSIGN_OR_RETURN(Value left, Evaluate(*node.left, env));
  if (op == "and") return Truthy(left) ? Evaluate(*node.right, env) : left;
  if (op == "or") return Truthy(left) ? left : Evaluate(*node.right, env);
  BATON_ASSIGN_OR_RETURN(Value right, Evaluate(*node.right, env));

  if (op == "==" || op == "!=") {
    BATON_ASSIGN_OR_RETURN(bool equal, LooseEquals(left, right, limits_.max_output_bytes));
    return Value::Bool(op == "==" ? equal : !equal);
  }
  const bool membership = op == "in" || op == "not in";
  if (left.IsUndefined() || right.IsUndefined()) {
    if (right.IsUndefined() && membership) return Value::Bool(op == "not in");
    return RuntimeError(StrCat("Cannot perform operation ", op, " on undefined values"));
  }
  if (left.IsNull() || right.IsNull()) {
    return RuntimeError(StrCat("Cannot perform operation ", op, " on null values"));
  }
  if (op == "~") {
    BATON_ASSIGN_OR_RETURN(std::string a, ToJsString(left, limits_.max_output_bytes));
    BATON_ASSIGN_OR_RETURN(std::string b, ToJsString(right, limits_.max_output_bytes));
    return MakeString(a + b);
  }
  if (op == "**" && IsNumericLike(left) && IsNumericLike(right)) {
    const double a = left.number(), b = right.number();
    if (a == 0 && b < 0) return RuntimeError("0.0 cannot be raised to a negative power");
    const double result = std::pow(a, b);
    if (!std::isfinite(result)) {
      return RuntimeError("Exponentiation result is not a finite real number");
    }
    const bool is_float = left.is(ValueKind::kFloat) || right.is(ValueKind::kFloat) || b < 0;
    return is_float ? Value::Float(result) : Value::Integer(result);
  }
  if (left.IsNumber() && right.IsNumber()) {
    const double a = left.number(), b = right.number();
    const bool is_float = left.is(ValueKind::kFloat) || right.is(ValueKind::kFloat);
    auto number = [&](double v) { return is_float ? Value::Float(v) : Value::Integer(v); };
    if (op == "+") return number(a + b);
    if (op == "-") return number(a - b);
    if (op == "*") return number(a * b);
    if (op == "/") return Value::Float(a / b);
    if (op == "//") return number(std::floor(a / b));
    if (op == "%") return number(std::fmod(a, b));
    if (op == "<") return Value::Bool(a < b);
    if (op == ">") return Value::Bool(a > b);
    if (op == ">=") return Value::Bool(a >= b);
    if (op == "<=") return Value::Bool(a <= b);
  } else if (left.IsArrayLike() && right.IsArrayLike()) {
    if (op == "+") {
      const auto& a = left.array().items;
      const auto& b = right.array().items;
      BATON_RETURN_IF_ERROR(Charge(a.size() + b.size()));
      std::vector<Value> joined;
      joined.reserve(a.size() + b.size());
      joined.insert(joined.end(), a.begin(), a.end());
      joined.insert(joined.end(), b.begin(), b.end());
      return Value::Array(std::move(joined));
    }
  } else if (right.IsArrayLike()) {
    if (membership) {
      const auto& items = right.array().items;
      bool member = std::any_of(items.begin(), items.end(),
                                [&](const Value& x) { return StrictEquals(x, left); });
      return Value::Bool(op == "in" ? member : !member);
    }
  }
  if ((left.IsString() || right.IsString()) && op == "+") {
    BATON_ASSIGN_OR_RETURN(std::string a, ToJsString(left, limits_.max_output_bytes));
    BATON_ASSIGN_OR_RETURN(std::string b, ToJsString(right, limits_.max_output_bytes));
    return MakeString(a + b);
  }
  if (left.IsString() && right.IsString()) {
    if (membership) {
      bool found = right.str().find(left.str()) != std::string::npos;
      return Value::Bool(op == "in" ? found : !found);
    }
    // Baton extension: Python's ordering of strings by code point (the reference rejects
    // it). std::string compares UTF-8 bytes, which order like code points.
    int order = left.str().compare(right.str());
    if (op == "<") return Value::Bool(order < 0);
    if (op == ">") return Value::Bool(order > 0);
    if (op == "<=") return Value::Bool(order <= 0);
    if (op == ">=") return Value::Bool(order >= 0);
  }
  if (left.IsString() && right.IsObjectLike() && membership) {
    bool found = right.object().Find(left.str()) != nullptr;
    return Value::Bool(op == "in" ? found : !found);
  }
  // Baton extension: Python's string repetition ("-" * 10).
  if (op == "*" && left.IsString() && right.is(ValueKind::kInteger)) {
    const double times = right.number();
    if (times <= 0 || left.str().empty()) return Value::String("");
    BATON_RETURN_IF_ERROR(CheckSize(
        static_cast<size_t>(std::min(times * static_cast<double>(left.str().size()), 1e18))));
    std::string out;
    for (double i = 0; i < times; ++i) out += left.str();
    return Value::String(std::move(out));
  }
  return RuntimeError(StrCat("Unknown operator \"", op, "\" between ", KindName(left.kind()),
                             " and ", KindName(right.kind())));
}

absl::StatusOr<Value> Interpreter::EvalTest(const Test& node, const EnvPtr& env) {
  BATON_ASSIGN_OR_RETURN(Value operand, Evaluate(*node.operand, env));
  BATON_ASSIGN_OR_RETURN(EvaluatedArgs args, EvaluateArguments(node.args, env));
  BATON_ASSIGN_OR_RETURN(bool result, RunTest(node.name, operand, args.positional));
  return Value::Bool(node.negate ? !result : result);
}

}  // namespace baton::templating::jinja
