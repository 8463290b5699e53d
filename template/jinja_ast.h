// Jinja syntax tree. The node set and its shapes follow @huggingface/jinja's ast.ts so
// that the evaluator can follow runtime.ts step by step; a few nodes carry extra fields
// for constructs that library rejects and Baton accepts (tests with arguments).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace baton::templating::jinja {

enum class NodeKind {
  // Statements.
  kProgram,
  kIf,
  kFor,
  kBreak,
  kContinue,
  kSet,
  kMacro,
  kComment,
  kCallStatement,
  kFilterStatement,
  // Expressions.
  kMember,
  kCall,
  kIdentifier,
  kIntegerLiteral,
  kFloatLiteral,
  kStringLiteral,
  kArrayLiteral,
  kTupleLiteral,
  kObjectLiteral,
  kBinary,
  kFilter,
  kSelect,
  kTest,
  kUnary,
  kSlice,
  kKeywordArgument,
  kSpread,
  kKeywordSpread,
  kTernary,
};

struct Node {
  Node(NodeKind k, int l) : kind(k), line(l) {}
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  const NodeKind kind;
  const int line;
  int depth = 1;  // height of the subtree; the parser bounds it so evaluation cannot overflow
};

using NodePtr = std::unique_ptr<Node>;
using NodeList = std::vector<NodePtr>;

template <NodeKind K>
struct NodeOf : Node {
  static constexpr NodeKind kKind = K;
  explicit NodeOf(int line) : Node(K, line) {}
};

struct Program : NodeOf<NodeKind::kProgram> {
  using NodeOf::NodeOf;
  NodeList body;
};

struct If : NodeOf<NodeKind::kIf> {
  using NodeOf::NodeOf;
  NodePtr test;
  NodeList body, alternate;
};

struct For : NodeOf<NodeKind::kFor> {
  using NodeOf::NodeOf;
  NodePtr loopvar;  // Identifier or TupleLiteral
  NodePtr iterable;
  NodeList body, default_block;
};

struct Break : NodeOf<NodeKind::kBreak> {
  using NodeOf::NodeOf;
};
struct Continue : NodeOf<NodeKind::kContinue> {
  using NodeOf::NodeOf;
};
struct Comment : NodeOf<NodeKind::kComment> {
  using NodeOf::NodeOf;
};

struct SetStatement : NodeOf<NodeKind::kSet> {
  using NodeOf::NodeOf;
  NodePtr assignee;
  NodePtr value;  // null for a block set, whose value is `body` rendered
  NodeList body;
};

// Which of the special names a macro body reads before declaring them (Jinja binds
// `kwargs`/`varargs` only then, and otherwise rejects extra arguments).
struct SpecialArgs {
  bool kwargs = false;
  bool varargs = false;
};

struct Macro : NodeOf<NodeKind::kMacro> {
  using NodeOf::NodeOf;
  std::string name;
  NodeList args;  // Identifier or KeywordArgument (a parameter with a default)
  NodeList body;
  SpecialArgs special;
};

struct CallStatement : NodeOf<NodeKind::kCallStatement> {
  using NodeOf::NodeOf;
  NodePtr call;  // a Call node
  std::optional<NodeList> caller_args;
  NodeList body;
  SpecialArgs special;
};

struct FilterStatement : NodeOf<NodeKind::kFilterStatement> {
  using NodeOf::NodeOf;
  NodePtr filter;  // Identifier or Call
  NodeList body;
};

struct Member : NodeOf<NodeKind::kMember> {
  using NodeOf::NodeOf;
  NodePtr object, property;
  bool computed = false;
};

struct Call : NodeOf<NodeKind::kCall> {
  using NodeOf::NodeOf;
  NodePtr callee;
  NodeList args;
};

struct Identifier : NodeOf<NodeKind::kIdentifier> {
  Identifier(int line, std::string n) : NodeOf(line), name(std::move(n)) {}
  std::string name;
};

struct IntegerLiteral : NodeOf<NodeKind::kIntegerLiteral> {
  IntegerLiteral(int line, double v) : NodeOf(line), value(v) {}
  double value;
};

struct FloatLiteral : NodeOf<NodeKind::kFloatLiteral> {
  FloatLiteral(int line, double v) : NodeOf(line), value(v) {}
  double value;
};

// Also the node for template text outside tags.
struct StringLiteral : NodeOf<NodeKind::kStringLiteral> {
  StringLiteral(int line, std::string v) : NodeOf(line), value(std::move(v)) {}
  std::string value;
};

struct ArrayLiteral : NodeOf<NodeKind::kArrayLiteral> {
  using NodeOf::NodeOf;
  NodeList items;
};

struct TupleLiteral : NodeOf<NodeKind::kTupleLiteral> {
  using NodeOf::NodeOf;
  NodeList items;
};

struct ObjectLiteral : NodeOf<NodeKind::kObjectLiteral> {
  using NodeOf::NodeOf;
  std::vector<std::pair<NodePtr, NodePtr>> entries;
};

struct Binary : NodeOf<NodeKind::kBinary> {
  using NodeOf::NodeOf;
  std::string op;  // as written: "+", "and", "not in", ...
  NodePtr left, right;
};

struct FilterExpr : NodeOf<NodeKind::kFilter> {
  using NodeOf::NodeOf;
  NodePtr operand;
  NodePtr filter;  // Identifier or Call
};

// `a if cond` without an else: undefined when cond is false; as a for-loop iterable it
// filters the items.
struct Select : NodeOf<NodeKind::kSelect> {
  using NodeOf::NodeOf;
  NodePtr lhs, test;
};

struct Test : NodeOf<NodeKind::kTest> {
  using NodeOf::NodeOf;
  NodePtr operand;
  bool negate = false;
  std::string name;
  NodeList args;  // Baton extension: `is divisibleby(3)`, `is equalto 5`
};

struct Unary : NodeOf<NodeKind::kUnary> {
  using NodeOf::NodeOf;
  std::string op;  // "not", "-", "+"
  NodePtr argument;
};

struct Slice : NodeOf<NodeKind::kSlice> {
  using NodeOf::NodeOf;
  NodePtr start, stop, step;  // each may be null
};

struct KeywordArgument : NodeOf<NodeKind::kKeywordArgument> {
  using NodeOf::NodeOf;
  std::string key;
  NodePtr value;
};

struct Spread : NodeOf<NodeKind::kSpread> {
  using NodeOf::NodeOf;
  NodePtr argument;
};

struct KeywordSpread : NodeOf<NodeKind::kKeywordSpread> {
  using NodeOf::NodeOf;
  NodePtr argument;
};

struct Ternary : NodeOf<NodeKind::kTernary> {
  using NodeOf::NodeOf;
  NodePtr condition, true_expr, false_expr;
};

template <typename T>
const T& As(const Node& node) {
  return static_cast<const T&>(node);
}

// Calls `f` on each direct child, in the field order of ast.ts (the order in which
// runtime.ts's generic visitor walks them).
void ForEachChild(const Node& node, const std::function<void(const Node&)>& f);

// The special names a macro (or call block) with these parameters reads in `body`.
SpecialArgs FindSpecialArgs(const NodeList& params, const NodeList& body);

}  // namespace baton::templating::jinja
