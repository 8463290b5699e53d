// Jinja evaluator, a port of @huggingface/jinja's Interpreter (runtime.ts). It keeps
// that library's observable behaviour, quirks included (dynamic scoping of macros, a
// `break` discarding the current iteration's output, JavaScript equality and number
// printing), because chat-template output must match the reference byte for byte.
// Where the reference throws, some constructs are accepted as extensions (more filters,
// tests with arguments, a few string methods); see jinja_filters.cc.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "template/jinja_ast.h"
#include "template/jinja_stack.h"
#include "template/jinja_strings.h"
#include "template/jinja_value.h"

namespace baton::templating::jinja {

// One scope. Lookups walk to the parents; assignments always land in this scope.
class Env {
 public:
  explicit Env(std::shared_ptr<Env> parent = nullptr) : parent_(std::move(parent)) {}
  ~Env();

  Value Lookup(std::string_view name) const;
  void Set(std::string_view name, Value value);
  bool HasLocal(std::string_view name) const { return vars_.contains(Av(name)); }

 private:
  std::shared_ptr<Env> parent_;
  absl::flat_hash_map<std::string, Value> vars_;
};
using EnvPtr = std::shared_ptr<Env>;

struct EvalLimits {
  size_t max_output_bytes = 1 << 20;
  // Shared budget of loop iterations, macro calls and per-item filter work.
  size_t max_loop_iterations = 1 << 20;
  size_t max_recursion_depth = 64;  // nested macro calls
};

// Nested Evaluate() calls allowed at run time (macro recursion multiplies tree depth);
// the stack budget may stop evaluation earlier.
inline constexpr int kMaxEvaluationDepth = 3000;

// Marks a status as already carrying its template line.
inline constexpr char kLocatedPayload[] = "baton.jinja/located";
// Marks the status raise_exception() produced; its message is the template's own.
inline constexpr char kRaisedPayload[] = "baton.jinja/raised";

class Interpreter {
 public:
  // Evaluated call arguments: positional values, then keyword arguments in order.
  struct EvaluatedArgs {
    Args positional;
    std::shared_ptr<ObjectData> keywords = std::make_shared<ObjectData>();

    // positional[index] ?? keywords[key]
    std::optional<Value> Get(size_t index, std::string_view key) const {
      if (index < positional.size()) return positional[index];
      if (const Value* v = keywords->Find(key)) return *v;
      return std::nullopt;
    }
  };

  Interpreter(EvalLimits limits, DateParts now)
      : limits_(limits), now_(now), stack_(kStackBudgetBytes) {}
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // Renders `program` with `globals` as the outermost scope.
  absl::StatusOr<std::string> Run(const Program& program, const EnvPtr& globals);

  absl::StatusOr<Value> Evaluate(const Node& node, const EnvPtr& env);
  absl::StatusOr<Value> CallFunction(const Value& fn, Args& args, const EnvPtr& env);

  // Counts `n` units against max_loop_iterations.
  absl::Status Charge(size_t n);
  // Errors when a string of `bytes` would exceed max_output_bytes.
  absl::Status CheckSize(size_t bytes) const;
  absl::StatusOr<Value> MakeString(std::string s) const;
  // Containers a template mutated; emptied after the render so that reference cycles
  // the template built (ns.self = ns) are freed.
  void RegisterMutable(const Value& v) {
    if (mutated_.empty() || mutated_.back().identity() != v.identity()) mutated_.push_back(v);
  }

  const EvalLimits& limits() const { return limits_; }
  const DateParts& now() const { return now_; }

 private:
  absl::StatusOr<Value> EvaluateNode(const Node& node, const EnvPtr& env);
  absl::StatusOr<Value> EvalBlock(const NodeList& statements, const EnvPtr& env);
  absl::StatusOr<Value> EvalSet(const SetStatement& node, const EnvPtr& env);
  absl::StatusOr<Value> EvalFor(const For& node, const EnvPtr& env);
  absl::StatusOr<Value> EvalMacro(const Macro& node, const EnvPtr& env);
  absl::StatusOr<Value> EvalCallStatement(const CallStatement& node, const EnvPtr& env);
  absl::StatusOr<Value> EvalCall(const Call& node, const EnvPtr& env);
  absl::StatusOr<Value> EvalMember(const Member& node, const EnvPtr& env);
  absl::StatusOr<Value> EvalSlice(const Value& object, const Slice& node, const EnvPtr& env);
  absl::StatusOr<Value> EvalUnary(const Unary& node, const EnvPtr& env);
  absl::StatusOr<Value> EvalBinary(const Binary& node, const EnvPtr& env);
  absl::StatusOr<Value> EvalTest(const Test& node, const EnvPtr& env);

  absl::StatusOr<EvaluatedArgs> EvaluateArguments(const NodeList& args, const EnvPtr& env);

  // Calls (jinja_calls.cc).
  absl::StatusOr<Value> CallMacro(const Macro& node, Args& args, const EnvPtr& scope);
  // Binds macro (or call-block) arguments into `scope` following Jinja's rules.
  absl::Status BindMacroArguments(std::string_view display_name, const NodeList& params,
                                  SpecialArgs special, const Args& args, const EnvPtr& scope);

  // Filters (jinja_filters.cc, jinja_extension_filters.cc).
  absl::StatusOr<Value> ApplyFilter(const Value& operand, const Node& filter, const EnvPtr& env);
  absl::StatusOr<Value> ApplyBareFilter(const Value& operand, std::string_view name);
  absl::StatusOr<Value> ApplyCallFilter(const Value& operand, std::string_view name,
                                        EvaluatedArgs& args);
  // Where the reference throws: the filters it lacks, or an error naming the filter.
  // `args` is null for the bare form (`x|name`).
  absl::StatusOr<Value> ApplyExtensionFilter(const Value& operand, std::string_view name,
                                             EvaluatedArgs* args);

 private:
  EvalLimits limits_;
  DateParts now_;
  StackBudget stack_;
  size_t charged_ = 0;
  int eval_depth_ = 0;
  size_t macro_depth_ = 0;
  std::vector<Value> mutated_;
};

// Errors that name the construct; `line` is added by the evaluator.
absl::Status RuntimeError(std::string_view message);

}  // namespace baton::templating::jinja
