#include "template/jinja_ast.h"

#include <string>

namespace baton::templating::jinja {

void ForEachChild(const Node& node, const std::function<void(const Node&)>& f) {
  auto one = [&](const NodePtr& child) {
    if (child) f(*child);
  };
  auto all = [&](const NodeList& list) {
    for (const NodePtr& child : list) one(child);
  };
  switch (node.kind) {
    case NodeKind::kProgram:
      all(As<Program>(node).body);
      break;
    case NodeKind::kIf: {
      const auto& n = As<If>(node);
      one(n.test), all(n.body), all(n.alternate);
      break;
    }
    case NodeKind::kFor: {
      const auto& n = As<For>(node);
      one(n.loopvar), one(n.iterable), all(n.body), all(n.default_block);
      break;
    }
    case NodeKind::kSet: {
      const auto& n = As<SetStatement>(node);
      one(n.assignee), one(n.value), all(n.body);
      break;
    }
    case NodeKind::kMacro: {
      const auto& n = As<Macro>(node);
      all(n.args), all(n.body);
      break;
    }
    case NodeKind::kCallStatement: {
      const auto& n = As<CallStatement>(node);
      one(n.call);
      if (n.caller_args) all(*n.caller_args);
      all(n.body);
      break;
    }
    case NodeKind::kFilterStatement: {
      const auto& n = As<FilterStatement>(node);
      one(n.filter), all(n.body);
      break;
    }
    case NodeKind::kMember: {
      const auto& n = As<Member>(node);
      one(n.object), one(n.property);
      break;
    }
    case NodeKind::kCall: {
      const auto& n = As<Call>(node);
      one(n.callee), all(n.args);
      break;
    }
    case NodeKind::kArrayLiteral:
      all(As<ArrayLiteral>(node).items);
      break;
    case NodeKind::kTupleLiteral:
      all(As<TupleLiteral>(node).items);
      break;
    case NodeKind::kObjectLiteral:
      for (const auto& [key, value] : As<ObjectLiteral>(node).entries) one(key), one(value);
      break;
    case NodeKind::kBinary: {
      const auto& n = As<Binary>(node);
      one(n.left), one(n.right);
      break;
    }
    case NodeKind::kFilter: {
      const auto& n = As<FilterExpr>(node);
      one(n.operand), one(n.filter);
      break;
    }
    case NodeKind::kSelect: {
      const auto& n = As<Select>(node);
      one(n.lhs), one(n.test);
      break;
    }
    case NodeKind::kTest: {
      const auto& n = As<Test>(node);
      one(n.operand), all(n.args);
      break;
    }
    case NodeKind::kUnary:
      one(As<Unary>(node).argument);
      break;
    case NodeKind::kSlice: {
      const auto& n = As<Slice>(node);
      one(n.start), one(n.stop), one(n.step);
      break;
    }
    case NodeKind::kKeywordArgument:
      one(As<KeywordArgument>(node).value);
      break;
    case NodeKind::kSpread:
      one(As<Spread>(node).argument);
      break;
    case NodeKind::kKeywordSpread:
      one(As<KeywordSpread>(node).argument);
      break;
    case NodeKind::kTernary: {
      const auto& n = As<Ternary>(node);
      one(n.condition), one(n.true_expr), one(n.false_expr);
      break;
    }
    default:
      break;
  }
}

namespace {

// Mirrors findAccessedSpecialMacroArguments() in runtime.ts, visit order included: a
// name counts as read only when no earlier declaration (in that order) shadows it.
class SpecialArgsVisitor {
 public:
  SpecialArgs Run(const NodeList& params, const NodeList& body) {
    for (const NodePtr& p : params) DeclareArgument(*p);
    VisitList(body);
    return accessed_;
  }

 private:
  void DeclareName(const std::string& name) {
    if (name == "kwargs") declared_.kwargs = true;
    if (name == "varargs") declared_.varargs = true;
  }
  void DeclareTarget(const Node& target) {
    if (target.kind == NodeKind::kIdentifier) {
      DeclareName(As<Identifier>(target).name);
    } else if (target.kind == NodeKind::kTupleLiteral) {
      for (const NodePtr& item : As<TupleLiteral>(target).items) DeclareTarget(*item);
    }
  }
  void DeclareArgument(const Node& param) {
    if (param.kind == NodeKind::kIdentifier) DeclareName(As<Identifier>(param).name);
    if (param.kind == NodeKind::kKeywordArgument) DeclareName(As<KeywordArgument>(param).key);
  }
  void VisitDefaults(const NodeList& params) {
    for (const NodePtr& p : params) {
      if (p->kind == NodeKind::kKeywordArgument) Visit(*As<KeywordArgument>(*p).value);
    }
  }
  void VisitFilter(const Node& filter) {
    if (filter.kind == NodeKind::kCall) VisitList(As<Call>(filter).args);
  }
  void VisitList(const NodeList& list) {
    for (const NodePtr& n : list) Visit(*n);
  }
  void Visit(const Node& node) {
    switch (node.kind) {
      case NodeKind::kFor: {
        const auto& n = As<For>(node);
        DeclareTarget(*n.loopvar);
        if (n.iterable->kind == NodeKind::kSelect) {
          const auto& select = As<Select>(*n.iterable);
          Visit(*select.lhs);
          VisitList(n.body);
          VisitList(n.default_block);
          Visit(*select.test);
          return;
        }
        Visit(*n.iterable);
        VisitList(n.body);
        VisitList(n.default_block);
        return;
      }
      case NodeKind::kSet: {
        const auto& n = As<SetStatement>(node);
        DeclareTarget(*n.assignee);
        if (n.value) Visit(*n.value);
        VisitList(n.body);
        return;
      }
      case NodeKind::kMacro: {
        const auto& n = As<Macro>(node);
        for (const NodePtr& p : n.args) DeclareArgument(*p);
        VisitDefaults(n.args);
        VisitList(n.body);
        return;
      }
      case NodeKind::kCallStatement: {
        const auto& n = As<CallStatement>(node);
        Visit(*n.call);
        if (n.caller_args) {
          for (const NodePtr& p : *n.caller_args) DeclareArgument(*p);
          VisitDefaults(*n.caller_args);
        }
        VisitList(n.body);
        return;
      }
      case NodeKind::kFilterStatement: {
        const auto& n = As<FilterStatement>(node);
        VisitList(n.body);
        VisitFilter(*n.filter);
        return;
      }
      case NodeKind::kIdentifier: {
        const std::string& name = As<Identifier>(node).name;
        if (name == "kwargs" && !declared_.kwargs) accessed_.kwargs = true;
        if (name == "varargs" && !declared_.varargs) accessed_.varargs = true;
        return;
      }
      case NodeKind::kMember: {
        const auto& n = As<Member>(node);
        Visit(*n.object);
        if (n.computed) Visit(*n.property);
        return;
      }
      case NodeKind::kFilter: {
        const auto& n = As<FilterExpr>(node);
        Visit(*n.operand);
        VisitFilter(*n.filter);
        return;
      }
      case NodeKind::kTest:
        Visit(*As<Test>(node).operand);
        VisitList(As<Test>(node).args);
        return;
      case NodeKind::kSelect:
        Visit(*As<Select>(node).test);
        Visit(*As<Select>(node).lhs);
        return;
      default:
        ForEachChild(node, [&](const Node& child) { Visit(child); });
    }
  }

  SpecialArgs declared_, accessed_;
};

}  // namespace

SpecialArgs FindSpecialArgs(const NodeList& params, const NodeList& body) {
  return SpecialArgsVisitor().Run(params, body);
}

}  // namespace baton::templating::jinja
