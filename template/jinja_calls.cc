// Calls: function and macro calls, argument binding, call blocks. Macros follow runtime.ts,
// including its dynamic scoping (a macro body sees the caller's variables).
#include <optional>
#include <utility>

#include "common/status.h"
#include "common/strings.h"
#include "template/jinja_builtins.h"
#include "template/jinja_interpreter.h"

namespace baton::templating::jinja {

absl::StatusOr<Value> Interpreter::EvalMacro(const Macro& node, const EnvPtr& env) {
  const Macro* macro = &node;
  env->Set(node.name,
           MakeFunction(node.name, [macro](Interpreter& interp, Args& args, const EnvPtr& scope) {
             return interp.CallMacro(*macro, args, scope);
           }));
  return Value::Null();
}

absl::StatusOr<Value> Interpreter::CallMacro(const Macro& node, Args& args, const EnvPtr& scope) {
  if (macro_depth_ >= limits_.max_recursion_depth) {
    return absl::InvalidArgumentError(StrCat("macro '", node.name,
                                             "': calls nested deeper than max_recursion_depth (",
                                             limits_.max_recursion_depth, ")"));
  }
  BATON_RETURN_IF_ERROR(Charge(1));
  // Macros see the caller's scope, not the one they were defined in (as in runtime.ts).
  auto macro_scope = std::make_shared<Env>(scope);
  BATON_RETURN_IF_ERROR(
      BindMacroArguments(StrCat("'", node.name, "'"), node.args, node.special, args, macro_scope));
  ++macro_depth_;
  absl::StatusOr<Value> result = EvalBlock(node.body, macro_scope);
  --macro_depth_;
  return result;
}

absl::Status Interpreter::BindMacroArguments(std::string_view display_name, const NodeList& params,
                                             SpecialArgs special, const Args& args,
                                             const EnvPtr& scope) {
  Args positional = args;
  auto keywords = std::make_shared<ObjectData>();
  if (!positional.empty() && positional.back().is(ValueKind::kKwargs)) {
    for (const auto& [key, value] : positional.back().object().entries()) keywords->Set(key, value);
    positional.pop_back();
  }
  std::vector<std::pair<std::string, const Node*>> pending_defaults;
  for (size_t i = 0; i < params.size(); ++i) {
    const Node& param = *params[i];
    std::string name;
    const Node* default_value = nullptr;
    if (param.kind == NodeKind::kIdentifier) {
      name = As<Identifier>(param).name;
    } else {
      name = As<KeywordArgument>(param).key;
      default_value = As<KeywordArgument>(param).value.get();
    }
    std::optional<Value> value;
    if (i < positional.size()) value = positional[i];
    if (!value) {
      if (const Value* keyword = keywords->Find(name)) {
        value = *keyword;
        keywords->Erase(name);
      }
    }
    if (!value && default_value != nullptr) pending_defaults.emplace_back(name, default_value);
    scope->Set(name, value.value_or(Value()));
  }
  if (special.kwargs) {
    scope->Set("kwargs", Value::Object(keywords));
  } else if (keywords->size() > 0) {
    return RuntimeError(StrCat("macro ", display_name, " takes no keyword argument '",
                               keywords->entries().front().first, "'"));
  }
  if (special.varargs) {
    std::vector<Value> rest;
    for (size_t i = params.size(); i < positional.size(); ++i) rest.push_back(positional[i]);
    scope->Set("varargs", Value::Array(std::move(rest)));
  } else if (positional.size() > params.size()) {
    return RuntimeError(
        StrCat("macro ", display_name, " takes not more than ", params.size(), " argument(s)"));
  }
  for (const auto& [name, default_node] : pending_defaults) {
    BATON_ASSIGN_OR_RETURN(Value v, Evaluate(*default_node, scope));
    scope->Set(name, std::move(v));
  }
  return absl::OkStatus();
}

absl::StatusOr<Value> Interpreter::EvalCallStatement(const CallStatement& node, const EnvPtr& env) {
  const CallStatement* statement = &node;
  Value caller = MakeFunction("caller",
                              [statement, lexical = env](Interpreter& interp, Args& args,
                                                         const EnvPtr&) -> absl::StatusOr<Value> {
                                static const NodeList kNoParams;
                                auto block_env = std::make_shared<Env>(lexical);
                                const NodeList& params =
                                    statement->caller_args ? *statement->caller_args : kNoParams;
                                BATON_RETURN_IF_ERROR(interp.BindMacroArguments(
                                    "None", params, statement->special, args, block_env));
                                return interp.EvalBlock(statement->body, block_env);
                              });
  const auto& call = As<Call>(*node.call);
  BATON_ASSIGN_OR_RETURN(EvaluatedArgs evaluated, EvaluateArguments(call.args, env));
  evaluated.positional.push_back(Value::Object(evaluated.keywords, ValueKind::kKwargs));
  BATON_ASSIGN_OR_RETURN(Value fn, Evaluate(*call.callee, env));
  if (!fn.is(ValueKind::kFunction)) {
    return RuntimeError(
        StrCat("Cannot call something that is not a function: got ", KindName(fn.kind())));
  }
  auto call_env = std::make_shared<Env>(env);
  call_env->Set("caller", std::move(caller));
  return CallFunction(fn, evaluated.positional, call_env);
}

absl::StatusOr<Interpreter::EvaluatedArgs> Interpreter::EvaluateArguments(const NodeList& args,
                                                                          const EnvPtr& env) {
  EvaluatedArgs out;
  // Like Python, all positional arguments (including `*` unpacking) are evaluated first.
  for (const NodePtr& arg : args) {
    if (arg->kind == NodeKind::kSpread) {
      BATON_ASSIGN_OR_RETURN(Value v, Evaluate(*As<Spread>(*arg).argument, env));
      if (!v.IsArrayLike()) {
        return RuntimeError(StrCat("Cannot unpack non-iterable type: ", KindName(v.kind())));
      }
      for (const Value& item : v.array().items) out.positional.push_back(item);
    } else if (arg->kind != NodeKind::kKeywordArgument && arg->kind != NodeKind::kKeywordSpread) {
      BATON_ASSIGN_OR_RETURN(Value v, Evaluate(*arg, env));
      out.positional.push_back(std::move(v));
    }
  }
  auto add_keyword = [&](const std::string& key, Value value) -> absl::Status {
    if (out.keywords->Find(key) != nullptr) {
      return RuntimeError(StrCat("Got multiple values for keyword argument '", key, "'"));
    }
    out.keywords->Set(key, std::move(value));
    return absl::OkStatus();
  };
  for (const NodePtr& arg : args) {
    if (arg->kind == NodeKind::kKeywordArgument) {
      const auto& kw = As<KeywordArgument>(*arg);
      BATON_ASSIGN_OR_RETURN(Value v, Evaluate(*kw.value, env));
      BATON_RETURN_IF_ERROR(add_keyword(kw.key, std::move(v)));
    } else if (arg->kind == NodeKind::kKeywordSpread) {
      BATON_ASSIGN_OR_RETURN(Value v, Evaluate(*As<KeywordSpread>(*arg).argument, env));
      if (!v.IsObjectLike()) {
        return RuntimeError(
            StrCat("Argument after ** must be a mapping, not ", KindName(v.kind())));
      }
      for (const auto& [key, value] : v.object().entries()) {
        BATON_RETURN_IF_ERROR(add_keyword(key, value));
      }
    }
  }
  return out;
}

absl::StatusOr<Value> Interpreter::EvalCall(const Call& node, const EnvPtr& env) {
  BATON_ASSIGN_OR_RETURN(EvaluatedArgs evaluated, EvaluateArguments(node.args, env));
  if (evaluated.keywords->size() > 0) {
    evaluated.positional.push_back(Value::Object(evaluated.keywords, ValueKind::kKwargs));
  }
  BATON_ASSIGN_OR_RETURN(Value fn, Evaluate(*node.callee, env));
  if (!fn.is(ValueKind::kFunction)) {
    std::string what;
    if (node.callee->kind == NodeKind::kIdentifier) {
      what = StrCat("unknown function '", As<Identifier>(*node.callee).name, "'");
    } else if (node.callee->kind == NodeKind::kMember && !As<Member>(*node.callee).computed &&
               As<Member>(*node.callee).property->kind == NodeKind::kIdentifier) {
      what = StrCat("unsupported method '", As<Identifier>(*As<Member>(*node.callee).property).name,
                    "'");
    } else {
      what = "call of a value that is not a function";
    }
    return RuntimeError(StrCat(what, " (got ", KindName(fn.kind()), ")"));
  }
  return CallFunction(fn, evaluated.positional, env);
}

}  // namespace baton::templating::jinja
