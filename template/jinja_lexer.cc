#include "template/jinja_lexer.h"

#include <array>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "common/strings.h"
#include "common/utf8.h"
#include "template/jinja_strings.h"

namespace baton::templating::jinja {
namespace {

// The source after preprocessing, with the original line of every byte so that errors
// can point into the template as written.
struct Source {
  std::string text;
  std::vector<int> line;

  void Append(const Source& from, size_t begin, size_t end) {
    if (begin >= end) return;
    text.append(from.text, begin, end - begin);
    line.insert(line.end(), from.line.begin() + static_cast<ptrdiff_t>(begin),
                from.line.begin() + static_cast<ptrdiff_t>(end));
  }
};

bool IsLineTerminatorAt(std::string_view s, size_t pos, size_t* length) {
  if (s[pos] == '\n' || s[pos] == '\r') {
    *length = 1;
    return true;
  }
  // U+2028 and U+2029 also end a line for JavaScript's multiline ^.
  if (s.substr(pos, 2) == "\xE2\x80" && pos + 2 < s.size() &&
      (s[pos + 2] == '\xA8' || s[pos + 2] == '\xA9')) {
    *length = 3;
    return true;
  }
  return false;
}

// template.replace(/^[ \t]*({[#%-])/gm, "$1")
Source LstripBlocks(const Source& in) {
  Source out;
  const std::string& s = in.text;
  size_t copied = 0;
  size_t line_start = 0;
  while (line_start < s.size()) {
    size_t end = line_start;
    while (end < s.size() && (s[end] == ' ' || s[end] == '\t')) ++end;
    if (end > line_start && end + 1 < s.size() && s[end] == '{' &&
        (s[end + 1] == '#' || s[end + 1] == '%' || s[end + 1] == '-')) {
      out.Append(in, copied, line_start);
      copied = end;
    }
    // The next line starts after \n, \r, U+2028 or U+2029.
    size_t next = s.find_first_of("\n\r\xE2", end);
    while (next != std::string::npos) {
      size_t length = 0;
      if (IsLineTerminatorAt(s, next, &length)) {
        next += length;
        break;
      }
      next = s.find_first_of("\n\r\xE2", next + 1);
    }
    if (next == std::string::npos) break;
    line_start = next;
  }
  out.Append(in, copied, s.size());
  return out;
}

// template.replace(/([#%-]})\n/g, "$1"): every "}\n" after one of #%- loses its newline
// (matches cannot overlap, since the newline is not in [#%-]).
Source TrimBlocks(const Source& in) {
  Source out;
  const std::string& s = in.text;
  size_t copied = 0;
  for (size_t q = s.find("}\n"); q != std::string::npos; q = s.find("}\n", q + 2)) {
    if (q == 0 || (s[q - 1] != '#' && s[q - 1] != '%' && s[q - 1] != '-')) continue;
    out.Append(in, copied, q + 1);
    copied = q + 2;
  }
  out.Append(in, copied, s.size());
  return out;
}

size_t SkipJsSpaces(std::string_view s, size_t pos) {
  while (pos < s.size()) {
    size_t next = pos;
    if (!IsJsSpace(NextCodePoint(s, &next))) break;
    pos = next;
  }
  return pos;
}

// Matches `{%-? \s* (end)?generation \s* -?%}` at pos; returns the end of "%}" or 0.
size_t MatchGenerationTag(std::string_view s, size_t pos, bool* lstrip, bool* rstrip) {
  if (s.substr(pos, 2) != "{%") return 0;
  pos += 2;
  *lstrip = pos < s.size() && s[pos] == '-';
  if (*lstrip) ++pos;
  pos = SkipJsSpaces(s, pos);
  if (s.substr(pos, 3) == "end") pos += 3;
  if (s.substr(pos, 10) != "generation") return 0;
  pos = SkipJsSpaces(s, pos + 10);
  *rstrip = pos < s.size() && s[pos] == '-';
  if (*rstrip) ++pos;
  if (s.substr(pos, 2) != "%}") return 0;
  return pos + 2;
}

// template.replace(/(\s*){%(-?)\s*(?:end)?generation\s*(-?)%}(\s*)/gs, ...)
Source RemoveGenerationTags(const Source& in) {
  const std::string& s = in.text;
  if (s.find("generation") == std::string::npos) return in;
  Source out;
  size_t copied = 0;  // everything before this is in `out` (the regex's lastIndex)
  size_t search = 0;
  while (true) {
    size_t open = s.find("{%", search);
    if (open == std::string::npos) break;
    bool lstrip = false, rstrip = false;
    size_t tag_end = MatchGenerationTag(s, open, &lstrip, &rstrip);
    if (tag_end == 0) {
      search = open + 1;
      continue;
    }
    // The leading (\s*) is the whitespace run that ends at the tag, back to lastIndex.
    size_t before = open;
    while (before > copied) {
      size_t start = before - 1;
      while (start > copied && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
      size_t probe = start;
      if (!IsJsSpace(NextCodePoint(s, &probe)) || probe != before) break;
      before = start;
    }
    size_t after = SkipJsSpaces(s, tag_end);
    out.Append(in, copied, before);
    if (!lstrip) out.Append(in, before, open);
    if (!rstrip) out.Append(in, tag_end, after);
    copied = after;
    search = after;
  }
  out.Append(in, copied, s.size());
  return out;
}

Source Preprocess(std::string_view template_source) {
  Source src;
  src.text.assign(template_source);
  src.line.resize(src.text.size());
  int line = 1;
  for (size_t i = 0; i < src.text.size(); ++i) {
    src.line[i] = line;
    if (src.text[i] == '\n') ++line;
  }
  if (!src.text.empty() && src.text.back() == '\n') {
    src.text.pop_back();
    src.line.pop_back();
  }
  return RemoveGenerationTags(TrimBlocks(LstripBlocks(src)));
}

constexpr std::array<std::pair<std::string_view, TokenType>, 29> kMappingTable = {{
    {"{%", TokenType::kOpenStatement},
    {"%}", TokenType::kCloseStatement},
    {"{{", TokenType::kOpenExpression},
    {"}}", TokenType::kCloseExpression},
    {"(", TokenType::kOpenParen},
    {")", TokenType::kCloseParen},
    {"{", TokenType::kOpenCurlyBracket},
    {"}", TokenType::kCloseCurlyBracket},
    {"[", TokenType::kOpenSquareBracket},
    {"]", TokenType::kCloseSquareBracket},
    {",", TokenType::kComma},
    {".", TokenType::kDot},
    {":", TokenType::kColon},
    {"|", TokenType::kPipe},
    {"<=", TokenType::kComparisonBinaryOperator},
    {">=", TokenType::kComparisonBinaryOperator},
    {"==", TokenType::kComparisonBinaryOperator},
    {"!=", TokenType::kComparisonBinaryOperator},
    {"<", TokenType::kComparisonBinaryOperator},
    {">", TokenType::kComparisonBinaryOperator},
    {"+", TokenType::kAdditiveBinaryOperator},
    {"-", TokenType::kAdditiveBinaryOperator},
    {"~", TokenType::kAdditiveBinaryOperator},
    {"**", TokenType::kExponentiationBinaryOperator},
    {"*", TokenType::kMultiplicativeBinaryOperator},
    {"//", TokenType::kMultiplicativeBinaryOperator},
    {"/", TokenType::kMultiplicativeBinaryOperator},
    {"%", TokenType::kMultiplicativeBinaryOperator},
    {"=", TokenType::kEquals},
}};

bool IsWordChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
bool IsDigitChar(char c) { return c >= '0' && c <= '9'; }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = static_cast<char>(c | 0x20);
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

class Lexer {
 public:
  explicit Lexer(Source src) : src_(std::move(src)), s_(src_.text) {}

  absl::StatusOr<std::vector<Token>> Run();

 private:
  enum class Pred { kWhitespace, kInteger, kWord, kNotQuote };

  int LineAt(size_t pos) const {
    if (src_.line.empty()) return 1;
    return src_.line[std::min(pos, src_.line.size() - 1)];
  }
  absl::Status Error(std::string_view message) const {
    return absl::InvalidArgumentError(StrCat("syntax error: ", message, " at line ", LineAt(pos_)));
  }
  char At(size_t pos) const { return pos < s_.size() ? s_[pos] : '\0'; }
  TokenType LastType() const { return tokens_.back().type; }
  void Push(TokenType type, std::string value, size_t start) {
    tokens_.push_back(Token{type, std::move(value), LineAt(start)});
  }

  // JavaScript reads src[length] as undefined; /\w/ and `c !== quote` accept it (and the
  // loop then fails with "Unexpected end of input"), /\s/ and /[0-9]/ do not.
  bool Test(Pred pred, char quote, size_t* width) const {
    *width = 1;
    if (pos_ >= s_.size()) return pred == Pred::kWord || pred == Pred::kNotQuote;
    char c = s_[pos_];
    switch (pred) {
      case Pred::kWhitespace: {
        size_t next = pos_;
        bool space = IsJsSpace(NextCodePoint(s_, &next));
        *width = next - pos_;
        return space;
      }
      case Pred::kInteger:
        return IsDigitChar(c);
      case Pred::kWord:
        return IsWordChar(c);
      case Pred::kNotQuote:
        return c != quote;
    }
    return false;
  }

  absl::StatusOr<std::string> ConsumeWhile(Pred pred, char quote = 0);
  void StripTrailingWhitespace();
  void SkipLeadingWhitespace() { pos_ = SkipJsSpaces(s_, pos_); }

  Source src_;
  std::string_view s_;
  size_t pos_ = 0;
  int curly_depth_ = 0;
  std::vector<Token> tokens_;
};

absl::StatusOr<std::string> Lexer::ConsumeWhile(Pred pred, char quote) {
  std::string str;
  char32_t pending_high = 0;  // a \uD800-\uDBFF escape waiting for its low half
  auto flush_pending = [&] {
    if (pending_high != 0) AppendUtf8(kReplacementChar, &str);
    pending_high = 0;
  };
  size_t width = 1;
  while (Test(pred, quote, &width)) {
    if (pos_ < s_.size() && s_[pos_] == '\\') {
      ++pos_;
      if (pos_ >= s_.size()) return Error("Unexpected end of input");
      char escaped = s_[pos_++];
      if (escaped == 'x' || escaped == 'u') {
        size_t length = escaped == 'x' ? 2 : 4;
        std::string_view hex = s_.substr(pos_, length);
        unsigned value = 0;
        bool valid = hex.size() == length;
        for (char c : hex) {
          int d = HexValue(c);
          if (d < 0) valid = false;
          value = value * 16 + static_cast<unsigned>(d < 0 ? 0 : d);
        }
        if (!valid) {
          return Error(
              StrCat("Invalid hexadecimal escape sequence: \\", std::string(1, escaped), hex));
        }
        pos_ += length;
        if (value >= 0xDC00 && value <= 0xDFFF && pending_high != 0) {
          AppendUtf8(0x10000 + ((pending_high - 0xD800) << 10) + (value - 0xDC00), &str);
          pending_high = 0;
        } else {
          flush_pending();
          if (value >= 0xD800 && value <= 0xDBFF) {
            pending_high = value;
          } else if (value >= 0xDC00 && value <= 0xDFFF) {
            AppendUtf8(kReplacementChar, &str);
          } else {
            AppendUtf8(value, &str);
          }
        }
        continue;
      }
      flush_pending();
      switch (escaped) {
        case 'n':
          str.push_back('\n');
          break;
        case 't':
          str.push_back('\t');
          break;
        case 'r':
          str.push_back('\r');
          break;
        case 'b':
          str.push_back('\b');
          break;
        case 'f':
          str.push_back('\f');
          break;
        case 'v':
          str.push_back('\v');
          break;
        case '\'':
          str.push_back('\'');
          break;
        case '"':
          str.push_back('"');
          break;
        case '\\':
          str.push_back('\\');
          break;
        default:
          return Error(StrCat("Unexpected escaped character: ", std::string(1, escaped)));
      }
      continue;
    }
    flush_pending();
    if (pos_ >= s_.size()) return Error("Unexpected end of input");
    str.append(s_.substr(pos_, width));
    pos_ += width;
    if (pos_ >= s_.size()) return Error("Unexpected end of input");
  }
  flush_pending();
  return str;
}

void Lexer::StripTrailingWhitespace() {
  if (tokens_.empty() || tokens_.back().type != TokenType::kText) return;
  std::string& value = tokens_.back().value;
  value.resize(JsTrimEnd(value).size());
  if (value.empty()) tokens_.pop_back();
}

absl::StatusOr<std::vector<Token>> Lexer::Run() {
  while (pos_ < s_.size()) {
    const size_t start = pos_;
    if (tokens_.empty() || LastType() == TokenType::kCloseStatement ||
        LastType() == TokenType::kCloseExpression || LastType() == TokenType::kComment) {
      size_t end = pos_;
      while (end < s_.size() && !(s_[end] == '{' && (At(end + 1) == '%' || At(end + 1) == '{' ||
                                                     At(end + 1) == '#'))) {
        ++end;
      }
      if (end > pos_) {
        Push(TokenType::kText, std::string(s_.substr(pos_, end - pos_)), start);
        pos_ = end;
        continue;
      }
    }

    if (At(pos_) == '{' && At(pos_ + 1) == '#') {
      pos_ += 2;
      bool strip_before = At(pos_) == '-';
      if (strip_before) ++pos_;
      size_t begin = pos_;
      while (At(pos_) != '#' || At(pos_ + 1) != '}') {
        if (pos_ + 2 >= s_.size()) return Error("Missing end of comment tag");
        ++pos_;
      }
      std::string comment(s_.substr(begin, pos_ - begin));
      bool strip_after = !comment.empty() && comment.back() == '-';
      if (strip_after) comment.pop_back();
      if (strip_before) StripTrailingWhitespace();
      Push(TokenType::kComment, std::move(comment), start);
      pos_ += 2;
      if (strip_after) SkipLeadingWhitespace();
      continue;
    }

    if (s_.substr(pos_, 3) == "{%-") {
      StripTrailingWhitespace();
      Push(TokenType::kOpenStatement, "{%", start);
      pos_ += 3;
      continue;
    }
    if (s_.substr(pos_, 3) == "{{-") {
      StripTrailingWhitespace();
      Push(TokenType::kOpenExpression, "{{", start);
      curly_depth_ = 0;
      pos_ += 3;
      continue;
    }

    if (auto ws = ConsumeWhile(Pred::kWhitespace); !ws.ok()) return ws.status();
    const size_t token_start = pos_;

    if (s_.substr(pos_, 3) == "-%}") {
      Push(TokenType::kCloseStatement, "%}", token_start);
      pos_ += 3;
      SkipLeadingWhitespace();
      continue;
    }
    if (s_.substr(pos_, 3) == "-}}") {
      Push(TokenType::kCloseExpression, "}}", token_start);
      pos_ += 3;
      SkipLeadingWhitespace();
      continue;
    }

    const char c = At(pos_);
    if (c == '-' || c == '+') {
      if (tokens_.empty() || LastType() == TokenType::kText) {
        return Error(StrCat("Unexpected character: ", std::string(1, c)));
      }
      switch (LastType()) {
        case TokenType::kIdentifier:
        case TokenType::kNumericLiteral:
        case TokenType::kStringLiteral:
        case TokenType::kCloseParen:
        case TokenType::kCloseSquareBracket:
          break;  // a binary operator: falls through to the table
        default: {
          ++pos_;
          auto num = ConsumeWhile(Pred::kInteger);
          if (!num.ok()) return num.status();
          std::string number = *std::move(num);
          if (!number.empty() && At(pos_) == '.' && IsDigitChar(At(pos_ + 1))) {
            ++pos_;
            auto frac = ConsumeWhile(Pred::kInteger);
            if (!frac.ok()) return frac.status();
            number = StrCat(number, ".", *frac);
          }
          const bool numeric = !number.empty();
          Push(numeric ? TokenType::kNumericLiteral : TokenType::kUnaryOperator,
               StrCat(std::string(1, c), number), token_start);
          continue;
        }
      }
    }

    bool matched = false;
    for (const auto& [seq, type] : kMappingTable) {
      if (seq == "}}" && curly_depth_ > 0) continue;
      if (s_.substr(pos_, seq.size()) != seq) continue;
      Push(type, std::string(seq), token_start);
      if (type == TokenType::kOpenExpression) {
        curly_depth_ = 0;
      } else if (type == TokenType::kOpenCurlyBracket) {
        ++curly_depth_;
      } else if (type == TokenType::kCloseCurlyBracket) {
        --curly_depth_;
      }
      pos_ += seq.size();
      matched = true;
      break;
    }
    if (matched) continue;

    if (c == '\'' || c == '"') {
      ++pos_;
      auto str = ConsumeWhile(Pred::kNotQuote, c);
      if (!str.ok()) return str.status();
      Push(TokenType::kStringLiteral, *std::move(str), token_start);
      ++pos_;
      continue;
    }

    if (IsDigitChar(c)) {
      auto num = ConsumeWhile(Pred::kInteger);
      if (!num.ok()) return num.status();
      std::string number = *std::move(num);
      if (LastType() != TokenType::kDot && At(pos_) == '.' && IsDigitChar(At(pos_ + 1))) {
        ++pos_;
        auto frac = ConsumeWhile(Pred::kInteger);
        if (!frac.ok()) return frac.status();
        number = StrCat(number, ".", *frac);
      }
      Push(TokenType::kNumericLiteral, std::move(number), token_start);
      continue;
    }
    if (IsWordChar(c)) {
      auto word = ConsumeWhile(Pred::kWord);
      if (!word.ok()) return word.status();
      Push(TokenType::kIdentifier, *std::move(word), token_start);
      continue;
    }

    size_t next = pos_;
    char32_t cp = NextCodePoint(s_, &next);
    std::string shown;
    AppendUtf8(cp, &shown);
    return Error(
        absl::StrFormat("Unexpected character: %s (U+%04X)", shown, static_cast<unsigned>(cp)));
  }
  return std::move(tokens_);
}

}  // namespace

std::string_view TokenTypeName(TokenType type) {
  switch (type) {
    case TokenType::kText:
      return "Text";
    case TokenType::kNumericLiteral:
      return "NumericLiteral";
    case TokenType::kStringLiteral:
      return "StringLiteral";
    case TokenType::kIdentifier:
      return "Identifier";
    case TokenType::kEquals:
      return "Equals";
    case TokenType::kOpenParen:
      return "OpenParen";
    case TokenType::kCloseParen:
      return "CloseParen";
    case TokenType::kOpenStatement:
      return "OpenStatement";
    case TokenType::kCloseStatement:
      return "CloseStatement";
    case TokenType::kOpenExpression:
      return "OpenExpression";
    case TokenType::kCloseExpression:
      return "CloseExpression";
    case TokenType::kOpenSquareBracket:
      return "OpenSquareBracket";
    case TokenType::kCloseSquareBracket:
      return "CloseSquareBracket";
    case TokenType::kOpenCurlyBracket:
      return "OpenCurlyBracket";
    case TokenType::kCloseCurlyBracket:
      return "CloseCurlyBracket";
    case TokenType::kComma:
      return "Comma";
    case TokenType::kDot:
      return "Dot";
    case TokenType::kColon:
      return "Colon";
    case TokenType::kPipe:
      return "Pipe";
    case TokenType::kAdditiveBinaryOperator:
      return "AdditiveBinaryOperator";
    case TokenType::kMultiplicativeBinaryOperator:
      return "MultiplicativeBinaryOperator";
    case TokenType::kExponentiationBinaryOperator:
      return "ExponentiationBinaryOperator";
    case TokenType::kComparisonBinaryOperator:
      return "ComparisonBinaryOperator";
    case TokenType::kUnaryOperator:
      return "UnaryOperator";
    case TokenType::kComment:
      return "Comment";
  }
  return "Unknown";
}

absl::StatusOr<std::vector<Token>> Tokenize(std::string_view source) {
  return Lexer(Preprocess(source)).Run();
}

}  // namespace baton::templating::jinja
