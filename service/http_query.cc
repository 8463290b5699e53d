#include "service/http_query.h"

#include <algorithm>

#include "common/strings.h"
#include "common/utf8.h"

namespace baton::service {
namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

absl::StatusOr<std::string> Decode(std::string_view piece) {
  std::string out;
  out.reserve(piece.size());
  for (size_t i = 0; i < piece.size(); ++i) {
    const char c = piece[i];
    if (c == '+') {
      out.push_back(' ');
    } else if (c != '%') {
      out.push_back(c);
    } else {
      const int hi = i + 2 < piece.size() ? HexDigit(piece[i + 1]) : -1;
      const int lo = hi >= 0 ? HexDigit(piece[i + 2]) : -1;
      if (lo < 0) {
        return absl::InvalidArgumentError(
            StrCat("the query string has a '%' at byte ", i,
                   " of a parameter without two hex digits after it; write '%25' for a '%'"));
      }
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    }
  }
  return out;
}

}  // namespace

std::string_view QueryOf(std::string_view target) {
  const size_t q = target.find('?');
  return q == std::string_view::npos ? std::string_view() : target.substr(q + 1);
}

absl::StatusOr<QueryParams> ParseQuery(std::string_view query, size_t max_params) {
  QueryParams params;
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view piece = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (piece.empty()) continue;
    if (params.size() == max_params) {
      return absl::InvalidArgumentError(
          StrCat("the query string has more than ", max_params, " parameters"));
    }
    const size_t eq = piece.find('=');
    auto name = Decode(piece.substr(0, eq));
    if (!name.ok()) return name.status();
    auto value = Decode(eq == std::string_view::npos ? std::string_view() : piece.substr(eq + 1));
    if (!value.ok()) return value.status();
    if (std::any_of(params.begin(), params.end(),
                    [&](const auto& p) { return p.first == *name; })) {
      return absl::InvalidArgumentError(
          StrCat("the query parameter '", SanitizeUtf8(*name), "' is given twice; give it once"));
    }
    params.emplace_back(*std::move(name), *std::move(value));
  }
  return params;
}

}  // namespace baton::service
