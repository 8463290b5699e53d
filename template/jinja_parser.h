// Jinja parser, a port of @huggingface/jinja's parse() (parser.ts): the same grammar,
// precedence and quirks (comma-free list literals, `a if b` without else), so a template
// parses here exactly when it parses there. Extensions: tests with arguments
// (`is divisibleby(3)`).
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "template/jinja_ast.h"
#include "template/jinja_lexer.h"

namespace baton::templating::jinja {

// Bounds on the shape of the tree, so that neither parsing nor evaluation can exhaust
// the stack on hostile input. Real chat templates stay far below both.
inline constexpr int kMaxParseNesting = 200;  // nested blocks, brackets and calls
inline constexpr int kMaxAstDepth = 512;      // height of the syntax tree

// Errors are InvalidArgument ("syntax error: ... at line N").
absl::StatusOr<std::unique_ptr<Program>> Parse(std::vector<Token> tokens);

}  // namespace baton::templating::jinja
