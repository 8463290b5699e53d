// Jinja lexer, a port of @huggingface/jinja's tokenize() (lexer.ts) including its
// preprocessing: HF renders chat templates with trim_blocks and lstrip_blocks on, removes
// one trailing newline, and drops transformers' {% generation %} tags. Reproducing its
// textual passes byte for byte is what makes whitespace in the output match.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace baton::templating::jinja {

enum class TokenType {
  kText,
  kNumericLiteral,
  kStringLiteral,
  kIdentifier,
  kEquals,
  kOpenParen,
  kCloseParen,
  kOpenStatement,
  kCloseStatement,
  kOpenExpression,
  kCloseExpression,
  kOpenSquareBracket,
  kCloseSquareBracket,
  kOpenCurlyBracket,
  kCloseCurlyBracket,
  kComma,
  kDot,
  kColon,
  kPipe,
  kAdditiveBinaryOperator,
  kMultiplicativeBinaryOperator,
  kExponentiationBinaryOperator,
  kComparisonBinaryOperator,
  kUnaryOperator,
  kComment,
};

std::string_view TokenTypeName(TokenType type);

struct Token {
  TokenType type;
  std::string value;
  int line = 1;  // 1-based line in the original source
};

// Errors are InvalidArgument with a message that names the line.
absl::StatusOr<std::vector<Token>> Tokenize(std::string_view source);

}  // namespace baton::templating::jinja
