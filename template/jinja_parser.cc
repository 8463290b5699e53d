#include "template/jinja_parser.h"

#include <algorithm>
#include <cstdlib>
#include <initializer_list>
#include <set>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "common/status.h"
#include "common/strings.h"
#include "template/jinja_stack.h"

namespace baton::templating::jinja {
namespace {

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  absl::StatusOr<std::unique_ptr<Program>> Run() {
    auto program = std::make_unique<Program>(1);
    while (current_ < tokens_.size()) {
      BATON_ASSIGN_OR_RETURN(NodePtr node, ParseAny());
      program->body.push_back(std::move(node));
    }
    BATON_RETURN_IF_ERROR(Seal(program.get()));
    return program;
  }

 private:
  enum class ArgsMode { kCall, kParameters };

  // Counts recursion in the parser itself; released when the parse function returns.
  class NestingGuard {
   public:
    NestingGuard(int* depth, const StackBudget& stack) : depth_(depth), stack_(stack) { ++*depth_; }
    ~NestingGuard() { --*depth_; }
    bool exceeded() const { return *depth_ > kMaxParseNesting || stack_.Exhausted(); }

   private:
    int* depth_;
    const StackBudget& stack_;
  };

  int Line() const {
    if (tokens_.empty()) return 1;
    return tokens_[std::min(current_, tokens_.size() - 1)].line;
  }
  absl::Status Error(std::string_view message) const {
    return absl::InvalidArgumentError(StrCat("syntax error: ", message, " at line ", Line()));
  }
  absl::Status NestingError() const {
    return Error(StrCat("template nesting exceeds ", kMaxParseNesting, " levels"));
  }
  std::string_view Describe(size_t index) const {
    return index < tokens_.size() ? TokenTypeName(tokens_[index].type) : "end of template";
  }

  // Computes the node's height and rejects trees deeper than kMaxAstDepth.
  absl::Status Seal(Node* node) const {
    int depth = 0;
    ForEachChild(*node, [&](const Node& child) { depth = std::max(depth, child.depth); });
    node->depth = depth + 1;
    if (node->depth > kMaxAstDepth) {
      return absl::InvalidArgumentError(StrCat("syntax error: expression nesting exceeds ",
                                               kMaxAstDepth, " levels at line ", node->line));
    }
    return absl::OkStatus();
  }
  template <typename T>
  absl::StatusOr<NodePtr> Done(std::unique_ptr<T> node) {
    BATON_RETURN_IF_ERROR(Seal(node.get()));
    return NodePtr(std::move(node));
  }

  bool Is(std::initializer_list<TokenType> types) const {
    if (current_ + types.size() > tokens_.size()) return false;
    size_t i = current_;
    for (TokenType t : types) {
      if (tokens_[i++].type != t) return false;
    }
    return true;
  }
  bool Is(TokenType type) const { return Is({type}); }
  bool IsStatement(std::initializer_list<std::string_view> names) const {
    if (current_ + 1 >= tokens_.size()) return false;
    if (tokens_[current_].type != TokenType::kOpenStatement) return false;
    const Token& next = tokens_[current_ + 1];
    if (next.type != TokenType::kIdentifier) return false;
    return std::find(names.begin(), names.end(), next.value) != names.end();
  }
  bool IsIdentifier(std::initializer_list<std::string_view> names) const {
    if (current_ + names.size() > tokens_.size()) return false;
    size_t i = current_;
    for (std::string_view name : names) {
      const Token& t = tokens_[i++];
      if (t.type != TokenType::kIdentifier || t.value != name) return false;
    }
    return true;
  }
  bool IsIdentifier(std::string_view name) const { return IsIdentifier({name}); }

  absl::StatusOr<const Token*> Expect(TokenType type, std::string_view what) {
    if (current_ >= tokens_.size()) {
      return Error(StrCat(what, ", got end of template"));
    }
    const Token* token = &tokens_[current_];
    if (token->type != type) {
      return Error(StrCat(what, ". ", TokenTypeName(token->type), " !== ", TokenTypeName(type)));
    }
    ++current_;
    return token;
  }
  absl::Status ExpectIdentifier(std::string_view name) {
    if (!IsIdentifier(name)) return Error(StrCat("Expected ", name));
    ++current_;
    return absl::OkStatus();
  }
  absl::Status ExpectEnd(std::string_view name) {
    BATON_RETURN_IF_ERROR(Expect(TokenType::kOpenStatement, "Expected {% token").status());
    BATON_RETURN_IF_ERROR(ExpectIdentifier(name));
    return Expect(TokenType::kCloseStatement, "Expected %} token").status();
  }
  // Parses statements into `body` until one of `names` opens the next statement.
  absl::Status ParseBodyUntil(std::initializer_list<std::string_view> names, NodeList* body) {
    while (!IsStatement(names)) {
      BATON_ASSIGN_OR_RETURN(NodePtr node, ParseAny());
      body->push_back(std::move(node));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<NodePtr> ParseAny();
  absl::StatusOr<NodePtr> ParseJinjaStatement();
  absl::StatusOr<NodePtr> ParseSetStatement(int line);
  absl::StatusOr<NodePtr> ParseIfStatement(int line);
  absl::StatusOr<NodePtr> ParseMacroStatement(int line);
  absl::StatusOr<NodePtr> ParseForStatement(int line);
  absl::StatusOr<NodePtr> ParseCallStatement(int line);
  absl::StatusOr<NodePtr> ParseFilterStatement(int line);
  absl::StatusOr<NodePtr> ParseExpressionSequence(bool primary);
  absl::StatusOr<NodePtr> ParseExpression();
  absl::StatusOr<NodePtr> ParseIfExpression();
  absl::StatusOr<NodePtr> ParseLogicalOr();
  absl::StatusOr<NodePtr> ParseLogicalAnd();
  absl::StatusOr<NodePtr> ParseLogicalNegation();
  absl::StatusOr<NodePtr> ParseComparison();
  absl::StatusOr<NodePtr> ParseAdditive();
  absl::StatusOr<NodePtr> ParseMultiplicative();
  absl::StatusOr<NodePtr> ParsePower();
  absl::StatusOr<NodePtr> ParseTest();
  absl::StatusOr<NodePtr> ParseFilter();
  absl::StatusOr<NodePtr> ParseUnarySign();
  absl::StatusOr<NodePtr> ParseCallMember();
  absl::StatusOr<NodePtr> ParseCallExpression(NodePtr callee);
  absl::StatusOr<NodeList> ParseArgs(ArgsMode mode);
  absl::StatusOr<NodeList> ParseArgumentsList(ArgsMode mode);
  absl::StatusOr<NodePtr> ParseMemberArgumentsList();
  absl::StatusOr<NodePtr> ParseMemberExpression(NodePtr object);
  absl::StatusOr<NodePtr> ParsePrimary();
  absl::StatusOr<NodePtr> MakeBinary(const Token& op, NodePtr left, NodePtr right);

  std::vector<Token> tokens_;
  size_t current_ = 0;
  int nesting_ = 0;
  StackBudget stack_{kStackBudgetBytes};
};

absl::StatusOr<NodePtr> Parser::ParseAny() {
  NestingGuard guard(&nesting_, stack_);
  if (guard.exceeded()) return NestingError();
  if (current_ >= tokens_.size()) {
    return Error("unexpected end of template (a block is missing its end tag)");
  }
  const Token& token = tokens_[current_];
  switch (token.type) {
    case TokenType::kComment:
      ++current_;
      return Done(std::make_unique<Comment>(token.line));
    case TokenType::kText:
      ++current_;
      return Done(std::make_unique<StringLiteral>(token.line, token.value));
    case TokenType::kOpenStatement:
      return ParseJinjaStatement();
    case TokenType::kOpenExpression: {
      ++current_;
      BATON_ASSIGN_OR_RETURN(NodePtr expr, ParseExpression());
      BATON_RETURN_IF_ERROR(
          Expect(TokenType::kCloseExpression, "Expected closing expression token").status());
      return expr;
    }
    default:
      return Error(StrCat("Unexpected token type: ", TokenTypeName(token.type)));
  }
}

absl::StatusOr<NodePtr> Parser::ParseJinjaStatement() {
  const int line = Line();
  BATON_RETURN_IF_ERROR(
      Expect(TokenType::kOpenStatement, "Expected opening statement token").status());
  if (current_ >= tokens_.size() || tokens_[current_].type != TokenType::kIdentifier) {
    return Error(StrCat("Unknown statement, got ", Describe(current_)));
  }
  const std::string name = tokens_[current_].value;
  ++current_;
  if (name == "set") return ParseSetStatement(line);
  if (name == "if") {
    BATON_ASSIGN_OR_RETURN(NodePtr result, ParseIfStatement(line));
    BATON_RETURN_IF_ERROR(ExpectEnd("endif"));
    return result;
  }
  if (name == "macro") {
    BATON_ASSIGN_OR_RETURN(NodePtr result, ParseMacroStatement(line));
    BATON_RETURN_IF_ERROR(ExpectEnd("endmacro"));
    return result;
  }
  if (name == "for") {
    BATON_ASSIGN_OR_RETURN(NodePtr result, ParseForStatement(line));
    BATON_RETURN_IF_ERROR(ExpectEnd("endfor"));
    return result;
  }
  if (name == "call") return ParseCallStatement(line);
  if (name == "break" || name == "continue") {
    BATON_RETURN_IF_ERROR(
        Expect(TokenType::kCloseStatement, "Expected closing statement token").status());
    if (name == "break") return Done(std::make_unique<Break>(line));
    return Done(std::make_unique<Continue>(line));
  }
  if (name == "filter") return ParseFilterStatement(line);
  --current_;
  return Error(StrCat("unsupported statement '", name, "'"));
}

absl::StatusOr<NodePtr> Parser::ParseSetStatement(int line) {
  auto node = std::make_unique<SetStatement>(line);
  BATON_ASSIGN_OR_RETURN(node->assignee, ParseExpressionSequence(false));
  if (Is(TokenType::kEquals)) {
    ++current_;
    BATON_ASSIGN_OR_RETURN(node->value, ParseExpressionSequence(false));
  } else {
    BATON_RETURN_IF_ERROR(Expect(TokenType::kCloseStatement, "Expected %} token").status());
    BATON_RETURN_IF_ERROR(ParseBodyUntil({"endset"}, &node->body));
    BATON_RETURN_IF_ERROR(Expect(TokenType::kOpenStatement, "Expected {% token").status());
    BATON_RETURN_IF_ERROR(ExpectIdentifier("endset"));
  }
  BATON_RETURN_IF_ERROR(
      Expect(TokenType::kCloseStatement, "Expected closing statement token").status());
  return Done(std::move(node));
}

absl::StatusOr<NodePtr> Parser::ParseIfStatement(int line) {
  NestingGuard guard(&nesting_, stack_);
  if (guard.exceeded()) return NestingError();
  auto node = std::make_unique<If>(line);
  BATON_ASSIGN_OR_RETURN(node->test, ParseExpression());
  BATON_RETURN_IF_ERROR(
      Expect(TokenType::kCloseStatement, "Expected closing statement token").status());
  BATON_RETURN_IF_ERROR(ParseBodyUntil({"elif", "else", "endif"}, &node->body));
  if (IsStatement({"elif"})) {
    const int elif_line = Line();
    current_ += 2;
    BATON_ASSIGN_OR_RETURN(NodePtr nested, ParseIfStatement(elif_line));
    node->alternate.push_back(std::move(nested));
  } else if (IsStatement({"else"})) {
    current_ += 2;
    BATON_RETURN_IF_ERROR(
        Expect(TokenType::kCloseStatement, "Expected closing statement token").status());
    BATON_RETURN_IF_ERROR(ParseBodyUntil({"endif"}, &node->alternate));
  }
  return Done(std::move(node));
}

absl::StatusOr<NodePtr> Parser::ParseMacroStatement(int line) {
  BATON_ASSIGN_OR_RETURN(NodePtr name, ParsePrimary());
  if (name->kind != NodeKind::kIdentifier) {
    return Error("Expected identifier following macro statement");
  }
  auto node = std::make_unique<Macro>(line);
  node->name = As<Identifier>(*name).name;
  BATON_ASSIGN_OR_RETURN(node->args, ParseArgs(ArgsMode::kParameters));
  BATON_RETURN_IF_ERROR(
      Expect(TokenType::kCloseStatement, "Expected closing statement token").status());
  BATON_RETURN_IF_ERROR(ParseBodyUntil({"endmacro"}, &node->body));
  node->special = FindSpecialArgs(node->args, node->body);
  return Done(std::move(node));
}

absl::StatusOr<NodePtr> Parser::ParseForStatement(int line) {
  auto node = std::make_unique<For>(line);
  BATON_ASSIGN_OR_RETURN(node->loopvar, ParseExpressionSequence(true));
  if (node->loopvar->kind != NodeKind::kIdentifier &&
      node->loopvar->kind != NodeKind::kTupleLiteral) {
    return Error("Expected identifier/tuple for the loop variable");
  }
  if (!IsIdentifier("in")) return Error("Expected `in` keyword following loop variable");
  ++current_;
  BATON_ASSIGN_OR_RETURN(node->iterable, ParseExpression());
  BATON_RETURN_IF_ERROR(
      Expect(TokenType::kCloseStatement, "Expected closing statement token").status());
  BATON_RETURN_IF_ERROR(ParseBodyUntil({"endfor", "else"}, &node->body));
  if (IsStatement({"else"})) {
    current_ += 2;
    BATON_RETURN_IF_ERROR(
        Expect(TokenType::kCloseStatement, "Expected closing statement token").status());
    BATON_RETURN_IF_ERROR(ParseBodyUntil({"endfor"}, &node->default_block));
  }
  return Done(std::move(node));
}

absl::StatusOr<NodePtr> Parser::ParseCallStatement(int line) {
  auto node = std::make_unique<CallStatement>(line);
  if (Is(TokenType::kOpenParen)) {
    BATON_ASSIGN_OR_RETURN(NodeList caller_args, ParseArgs(ArgsMode::kParameters));
    node->caller_args = std::move(caller_args);
  }
  BATON_ASSIGN_OR_RETURN(NodePtr callee, ParsePrimary());
  if (callee->kind != NodeKind::kIdentifier) {
    return Error("Expected identifier following call statement");
  }
  auto call = std::make_unique<Call>(line);
  call->callee = std::move(callee);
  BATON_ASSIGN_OR_RETURN(call->args, ParseArgs(ArgsMode::kCall));
  BATON_ASSIGN_OR_RETURN(node->call, Done(std::move(call)));
  BATON_RETURN_IF_ERROR(
      Expect(TokenType::kCloseStatement, "Expected closing statement token").status());
  BATON_RETURN_IF_ERROR(ParseBodyUntil({"endcall"}, &node->body));
  BATON_RETURN_IF_ERROR(Expect(TokenType::kOpenStatement, "Expected '{%'").status());
  BATON_RETURN_IF_ERROR(ExpectIdentifier("endcall"));
  BATON_RETURN_IF_ERROR(
      Expect(TokenType::kCloseStatement, "Expected closing statement token").status());
  static const NodeList kNoParams;
  node->special = FindSpecialArgs(node->caller_args ? *node->caller_args : kNoParams, node->body);
  return Done(std::move(node));
}

absl::StatusOr<NodePtr> Parser::ParseFilterStatement(int line) {
  auto node = std::make_unique<FilterStatement>(line);
  BATON_ASSIGN_OR_RETURN(node->filter, ParsePrimary());
  if (node->filter->kind == NodeKind::kIdentifier && Is(TokenType::kOpenParen)) {
    BATON_ASSIGN_OR_RETURN(node->filter, ParseCallExpression(std::move(node->filter)));
  }
  BATON_RETURN_IF_ERROR(
      Expect(TokenType::kCloseStatement, "Expected closing statement token").status());
  BATON_RETURN_IF_ERROR(ParseBodyUntil({"endfilter"}, &node->body));
  BATON_RETURN_IF_ERROR(Expect(TokenType::kOpenStatement, "Expected '{%'").status());
  BATON_RETURN_IF_ERROR(ExpectIdentifier("endfilter"));
  BATON_RETURN_IF_ERROR(Expect(TokenType::kCloseStatement, "Expected '%}'").status());
  return Done(std::move(node));
}

absl::StatusOr<NodePtr> Parser::ParseExpressionSequence(bool primary) {
  const int line = Line();
  auto parse_one = [&]() { return primary ? ParsePrimary() : ParseExpression(); };
  BATON_ASSIGN_OR_RETURN(NodePtr first, parse_one());
  if (!Is(TokenType::kComma)) return first;
  auto tuple = std::make_unique<TupleLiteral>(line);
  tuple->items.push_back(std::move(first));
  while (true) {
    ++current_;
    BATON_ASSIGN_OR_RETURN(NodePtr next, parse_one());
    tuple->items.push_back(std::move(next));
    if (!Is(TokenType::kComma)) break;
  }
  return Done(std::move(tuple));
}

absl::StatusOr<NodePtr> Parser::ParseExpression() {
  NestingGuard guard(&nesting_, stack_);
  if (guard.exceeded()) return NestingError();
  return ParseIfExpression();
}

absl::StatusOr<NodePtr> Parser::ParseIfExpression() {
  BATON_ASSIGN_OR_RETURN(NodePtr a, ParseLogicalOr());
  if (!IsIdentifier("if")) return a;
  const int line = Line();
  ++current_;
  BATON_ASSIGN_OR_RETURN(NodePtr test, ParseLogicalOr());
  if (IsIdentifier("else")) {
    ++current_;
    NestingGuard guard(&nesting_, stack_);
    if (guard.exceeded()) return NestingError();
    auto node = std::make_unique<Ternary>(line);
    node->condition = std::move(test);
    node->true_expr = std::move(a);
    BATON_ASSIGN_OR_RETURN(node->false_expr, ParseIfExpression());
    return Done(std::move(node));
  }
  auto node = std::make_unique<Select>(line);
  node->lhs = std::move(a);
  node->test = std::move(test);
  return Done(std::move(node));
}

absl::StatusOr<NodePtr> Parser::MakeBinary(const Token& op, NodePtr left, NodePtr right) {
  auto node = std::make_unique<Binary>(op.line);
  node->op = op.value;
  node->left = std::move(left);
  node->right = std::move(right);
  return Done(std::move(node));
}

absl::StatusOr<NodePtr> Parser::ParseLogicalOr() {
  BATON_ASSIGN_OR_RETURN(NodePtr left, ParseLogicalAnd());
  while (IsIdentifier("or")) {
    const Token op = tokens_[current_++];
    BATON_ASSIGN_OR_RETURN(NodePtr right, ParseLogicalAnd());
    BATON_ASSIGN_OR_RETURN(left, MakeBinary(op, std::move(left), std::move(right)));
  }
  return left;
}

absl::StatusOr<NodePtr> Parser::ParseLogicalAnd() {
  BATON_ASSIGN_OR_RETURN(NodePtr left, ParseLogicalNegation());
  while (IsIdentifier("and")) {
    const Token op = tokens_[current_++];
    BATON_ASSIGN_OR_RETURN(NodePtr right, ParseLogicalNegation());
    BATON_ASSIGN_OR_RETURN(left, MakeBinary(op, std::move(left), std::move(right)));
  }
  return left;
}

absl::StatusOr<NodePtr> Parser::ParseLogicalNegation() {
  NestingGuard guard(&nesting_, stack_);
  if (guard.exceeded()) return NestingError();
  NodePtr right;
  // As in parser.ts, a `not` that follows the negated operand starts over (`not a not b`
  // is `not b`).
  while (IsIdentifier("not")) {
    const int line = Line();
    ++current_;
    auto node = std::make_unique<Unary>(line);
    node->op = "not";
    BATON_ASSIGN_OR_RETURN(node->argument, ParseLogicalNegation());
    BATON_ASSIGN_OR_RETURN(right, Done(std::move(node)));
  }
  if (right) return right;
  return ParseComparison();
}

absl::StatusOr<NodePtr> Parser::ParseComparison() {
  BATON_ASSIGN_OR_RETURN(NodePtr left, ParseAdditive());
  while (true) {
    Token op;
    if (IsIdentifier({"not", "in"})) {
      op = Token{TokenType::kIdentifier, "not in", tokens_[current_].line};
      current_ += 2;
    } else if (IsIdentifier("in") || Is(TokenType::kComparisonBinaryOperator)) {
      op = tokens_[current_++];
    } else {
      break;
    }
    BATON_ASSIGN_OR_RETURN(NodePtr right, ParseAdditive());
    BATON_ASSIGN_OR_RETURN(left, MakeBinary(op, std::move(left), std::move(right)));
  }
  return left;
}

absl::StatusOr<NodePtr> Parser::ParseAdditive() {
  BATON_ASSIGN_OR_RETURN(NodePtr left, ParseMultiplicative());
  while (Is(TokenType::kAdditiveBinaryOperator)) {
    const Token op = tokens_[current_++];
    BATON_ASSIGN_OR_RETURN(NodePtr right, ParseMultiplicative());
    BATON_ASSIGN_OR_RETURN(left, MakeBinary(op, std::move(left), std::move(right)));
  }
  return left;
}

absl::StatusOr<NodePtr> Parser::ParseMultiplicative() {
  BATON_ASSIGN_OR_RETURN(NodePtr left, ParsePower());
  while (Is(TokenType::kMultiplicativeBinaryOperator)) {
    const Token op = tokens_[current_++];
    BATON_ASSIGN_OR_RETURN(NodePtr right, ParsePower());
    BATON_ASSIGN_OR_RETURN(left, MakeBinary(op, std::move(left), std::move(right)));
  }
  return left;
}

absl::StatusOr<NodePtr> Parser::ParsePower() {
  // Left-associative, as in Jinja: 2 ** 3 ** 2 == (2 ** 3) ** 2.
  BATON_ASSIGN_OR_RETURN(NodePtr left, ParseTest());
  while (Is(TokenType::kExponentiationBinaryOperator)) {
    const Token op = tokens_[current_++];
    BATON_ASSIGN_OR_RETURN(NodePtr right, ParseTest());
    BATON_ASSIGN_OR_RETURN(left, MakeBinary(op, std::move(left), std::move(right)));
  }
  return left;
}

absl::StatusOr<NodePtr> Parser::ParseTest() {
  BATON_ASSIGN_OR_RETURN(NodePtr operand, ParseFilter());
  while (IsIdentifier("is")) {
    const int line = Line();
    ++current_;
    auto node = std::make_unique<Test>(line);
    node->negate = IsIdentifier("not");
    if (node->negate) ++current_;
    BATON_ASSIGN_OR_RETURN(NodePtr name, ParsePrimary());
    if (name->kind != NodeKind::kIdentifier) return Error("Expected identifier for the test");
    node->name = As<Identifier>(*name).name;
    if (Is(TokenType::kOpenParen)) {
      BATON_ASSIGN_OR_RETURN(node->args, ParseArgs(ArgsMode::kCall));
    }
    node->operand = std::move(operand);
    BATON_ASSIGN_OR_RETURN(operand, Done(std::move(node)));
  }
  return operand;
}

absl::StatusOr<NodePtr> Parser::ParseFilter() {
  BATON_ASSIGN_OR_RETURN(NodePtr operand, ParseUnarySign());
  while (Is(TokenType::kPipe)) {
    const int line = Line();
    ++current_;
    BATON_ASSIGN_OR_RETURN(NodePtr filter, ParsePrimary());
    if (filter->kind != NodeKind::kIdentifier) return Error("Expected identifier for the filter");
    if (Is(TokenType::kOpenParen)) {
      BATON_ASSIGN_OR_RETURN(filter, ParseCallExpression(std::move(filter)));
    }
    auto node = std::make_unique<FilterExpr>(line);
    node->operand = std::move(operand);
    node->filter = std::move(filter);
    BATON_ASSIGN_OR_RETURN(operand, Done(std::move(node)));
  }
  return operand;
}

absl::StatusOr<NodePtr> Parser::ParseUnarySign() {
  NestingGuard guard(&nesting_, stack_);
  if (guard.exceeded()) return NestingError();
  if (current_ < tokens_.size()) {
    const Token& token = tokens_[current_];
    if ((token.type == TokenType::kUnaryOperator ||
         token.type == TokenType::kAdditiveBinaryOperator) &&
        (token.value == "-" || token.value == "+")) {
      auto node = std::make_unique<Unary>(token.line);
      node->op = token.value;
      ++current_;
      BATON_ASSIGN_OR_RETURN(node->argument, ParseUnarySign());
      return Done(std::move(node));
    }
  }
  return ParseCallMember();
}

absl::StatusOr<NodePtr> Parser::ParseCallMember() {
  BATON_ASSIGN_OR_RETURN(NodePtr primary, ParsePrimary());
  BATON_ASSIGN_OR_RETURN(NodePtr member, ParseMemberExpression(std::move(primary)));
  if (Is(TokenType::kOpenParen)) return ParseCallExpression(std::move(member));
  return member;
}

absl::StatusOr<NodePtr> Parser::ParseCallExpression(NodePtr callee) {
  NestingGuard guard(&nesting_, stack_);
  if (guard.exceeded()) return NestingError();
  auto call = std::make_unique<Call>(Line());
  call->callee = std::move(callee);
  BATON_ASSIGN_OR_RETURN(call->args, ParseArgs(ArgsMode::kCall));
  BATON_ASSIGN_OR_RETURN(NodePtr expression, Done(std::move(call)));
  BATON_ASSIGN_OR_RETURN(expression, ParseMemberExpression(std::move(expression)));
  if (Is(TokenType::kOpenParen)) return ParseCallExpression(std::move(expression));
  return expression;
}

absl::StatusOr<NodeList> Parser::ParseArgs(ArgsMode mode) {
  BATON_RETURN_IF_ERROR(
      Expect(TokenType::kOpenParen, "Expected opening parenthesis for arguments list").status());
  BATON_ASSIGN_OR_RETURN(NodeList args, ParseArgumentsList(mode));
  BATON_RETURN_IF_ERROR(
      Expect(TokenType::kCloseParen, "Expected closing parenthesis for arguments list").status());
  return args;
}

absl::StatusOr<NodeList> Parser::ParseArgumentsList(ArgsMode mode) {
  NodeList args;
  std::set<std::string> parameter_names;
  bool saw_keyword_or_default = false;
  bool saw_spread = false;
  while (!Is(TokenType::kCloseParen)) {
    const int line = Line();
    const bool keyword_spread = Is(TokenType::kExponentiationBinaryOperator);
    const bool positional_spread =
        Is(TokenType::kMultiplicativeBinaryOperator) && tokens_[current_].value == "*";
    if (mode == ArgsMode::kParameters && (keyword_spread || positional_spread)) {
      return Error("Argument unpacking is not allowed in parameter declarations");
    }
    if (keyword_spread) {
      ++current_;
      auto node = std::make_unique<KeywordSpread>(line);
      BATON_ASSIGN_OR_RETURN(node->argument, ParseExpression());
      BATON_ASSIGN_OR_RETURN(NodePtr spread, Done(std::move(node)));
      args.push_back(std::move(spread));
      if (Is(TokenType::kComma)) ++current_;
      if (!Is(TokenType::kCloseParen)) {
        return Error("Expected closing parenthesis: `**` must be applied to the final argument");
      }
      break;
    }
    NodePtr argument;
    if (positional_spread) {
      if (saw_spread) return Error("Only one `*` argument unpacking is allowed");
      saw_spread = true;
      ++current_;
      auto node = std::make_unique<Spread>(line);
      BATON_ASSIGN_OR_RETURN(node->argument, ParseExpression());
      BATON_ASSIGN_OR_RETURN(argument, Done(std::move(node)));
    } else {
      BATON_ASSIGN_OR_RETURN(argument, ParseExpression());
      if (Is(TokenType::kEquals)) {
        ++current_;
        if (argument->kind != NodeKind::kIdentifier) {
          return Error(mode == ArgsMode::kParameters
                           ? "Expected identifier for parameter declaration"
                           : "Expected identifier for keyword argument");
        }
        auto node = std::make_unique<KeywordArgument>(line);
        node->key = As<Identifier>(*argument).name;
        BATON_ASSIGN_OR_RETURN(node->value, ParseExpression());
        BATON_ASSIGN_OR_RETURN(argument, Done(std::move(node)));
      }
      if (mode == ArgsMode::kParameters) {
        std::string name;
        if (argument->kind == NodeKind::kIdentifier) {
          name = As<Identifier>(*argument).name;
        } else if (argument->kind == NodeKind::kKeywordArgument) {
          name = As<KeywordArgument>(*argument).key;
        } else {
          return Error("Expected identifier for parameter declaration");
        }
        if (!parameter_names.insert(name).second) {
          return Error(StrCat("Duplicate parameter name: ", name));
        }
      }
      if (argument->kind == NodeKind::kKeywordArgument) {
        saw_keyword_or_default = true;
      } else if (saw_keyword_or_default) {
        return Error(mode == ArgsMode::kCall
                         ? "Positional arguments must come before keyword arguments"
                         : "Non-default argument follows default argument");
      } else if (saw_spread) {
        return Error("Positional arguments must not follow `*` argument unpacking");
      }
    }
    args.push_back(std::move(argument));
    if (Is(TokenType::kComma)) ++current_;
  }
  return args;
}

absl::StatusOr<NodePtr> Parser::ParseMemberArgumentsList() {
  const int line = Line();
  std::vector<NodePtr> slices;
  bool is_slice = false;
  while (!Is(TokenType::kCloseSquareBracket)) {
    if (Is(TokenType::kColon)) {
      slices.push_back(nullptr);
      ++current_;
      is_slice = true;
    } else {
      BATON_ASSIGN_OR_RETURN(NodePtr expr, ParseExpression());
      slices.push_back(std::move(expr));
      if (Is(TokenType::kColon)) {
        ++current_;
        is_slice = true;
      }
    }
  }
  if (slices.empty()) return Error("Expected at least one argument for member/slice expression");
  if (is_slice) {
    if (slices.size() > 3) return Error("Expected 0-3 arguments for slice expression");
    auto node = std::make_unique<Slice>(line);
    slices.resize(3);
    node->start = std::move(slices[0]);
    node->stop = std::move(slices[1]);
    node->step = std::move(slices[2]);
    return Done(std::move(node));
  }
  return std::move(slices[0]);
}

absl::StatusOr<NodePtr> Parser::ParseMemberExpression(NodePtr object) {
  while (Is(TokenType::kDot) || Is(TokenType::kOpenSquareBracket)) {
    const Token& op = tokens_[current_++];
    auto node = std::make_unique<Member>(op.line);
    node->computed = op.type == TokenType::kOpenSquareBracket;
    if (node->computed) {
      NestingGuard guard(&nesting_, stack_);
      if (guard.exceeded()) return NestingError();
      BATON_ASSIGN_OR_RETURN(node->property, ParseMemberArgumentsList());
      BATON_RETURN_IF_ERROR(
          Expect(TokenType::kCloseSquareBracket, "Expected closing square bracket").status());
    } else {
      BATON_ASSIGN_OR_RETURN(node->property, ParsePrimary());
      if (node->property->kind != NodeKind::kIdentifier &&
          node->property->kind != NodeKind::kIntegerLiteral) {
        return Error("Expected identifier or integer following dot operator");
      }
    }
    node->object = std::move(object);
    BATON_ASSIGN_OR_RETURN(object, Done(std::move(node)));
  }
  return object;
}

absl::StatusOr<NodePtr> Parser::ParsePrimary() {
  NestingGuard guard(&nesting_, stack_);
  if (guard.exceeded()) return NestingError();
  if (current_ >= tokens_.size()) return Error("Unexpected end of template in expression");
  const Token& token = tokens_[current_++];
  switch (token.type) {
    case TokenType::kNumericLiteral: {
      double value = std::strtod(token.value.c_str(), nullptr);
      if (token.value.find('.') != std::string::npos) {
        return Done(std::make_unique<FloatLiteral>(token.line, value));
      }
      return Done(std::make_unique<IntegerLiteral>(token.line, value));
    }
    case TokenType::kStringLiteral: {
      std::string value = token.value;
      while (Is(TokenType::kStringLiteral)) value += tokens_[current_++].value;
      return Done(std::make_unique<StringLiteral>(token.line, std::move(value)));
    }
    case TokenType::kIdentifier:
      return Done(std::make_unique<Identifier>(token.line, token.value));
    case TokenType::kOpenParen: {
      BATON_ASSIGN_OR_RETURN(NodePtr expression, ParseExpressionSequence(false));
      BATON_RETURN_IF_ERROR(
          Expect(TokenType::kCloseParen, "Expected closing parenthesis").status());
      return expression;
    }
    case TokenType::kOpenSquareBracket: {
      auto node = std::make_unique<ArrayLiteral>(token.line);
      while (!Is(TokenType::kCloseSquareBracket)) {
        BATON_ASSIGN_OR_RETURN(NodePtr item, ParseExpression());
        node->items.push_back(std::move(item));
        if (Is(TokenType::kComma)) ++current_;
      }
      ++current_;
      return Done(std::move(node));
    }
    case TokenType::kOpenCurlyBracket: {
      auto node = std::make_unique<ObjectLiteral>(token.line);
      while (!Is(TokenType::kCloseCurlyBracket)) {
        BATON_ASSIGN_OR_RETURN(NodePtr key, ParseExpression());
        BATON_RETURN_IF_ERROR(
            Expect(TokenType::kColon, "Expected colon between key and value in object literal")
                .status());
        BATON_ASSIGN_OR_RETURN(NodePtr value, ParseExpression());
        node->entries.emplace_back(std::move(key), std::move(value));
        if (Is(TokenType::kComma)) ++current_;
      }
      ++current_;
      return Done(std::move(node));
    }
    default:
      --current_;
      return Error(StrCat("Unexpected token: ", TokenTypeName(token.type)));
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<Program>> Parse(std::vector<Token> tokens) {
  return Parser(std::move(tokens)).Run();
}

}  // namespace baton::templating::jinja
