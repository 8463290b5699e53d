// String concatenation that accepts std::string_view. Debian's Abseil is built with its
// own absl::string_view, so absl::StrCat does not take std::string_view arguments.
//
//   return absl::InvalidArgumentError(baton::StrCat("field '", key, "' is ", n, " bytes"));
#pragma once

#include <charconv>
#include <concepts>
#include <string>
#include <string_view>

#include "absl/strings/string_view.h"

namespace baton {
namespace strings_internal {

inline void Append(std::string* out, std::string_view s) { out->append(s); }
inline void Append(std::string* out, const char* s) { out->append(s); }
inline void Append(std::string* out, const std::string& s) { out->append(s); }
inline void Append(std::string* out, char c) { out->push_back(c); }
inline void Append(std::string* out, bool b) { out->append(b ? "true" : "false"); }
#ifndef ABSL_USES_STD_STRING_VIEW
inline void Append(std::string* out, absl::string_view s) { out->append(s.data(), s.size()); }
#endif
template <typename T>
requires(std::integral<T> || std::floating_point<T>) void Append(std::string* out, T value) {
  char buf[64];
  auto result = std::to_chars(buf, buf + sizeof(buf), value);
  out->append(buf, result.ptr);
}

}  // namespace strings_internal

template <typename... Args>
std::string StrCat(const Args&... args) {
  std::string out;
  (strings_internal::Append(&out, args), ...);
  return out;
}

// Replaces every non-overlapping occurrence of `from` (non-empty) with `to`.
inline std::string ReplaceAll(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  size_t last = 0;
  for (size_t pos = s.find(from); pos != std::string_view::npos; pos = s.find(from, last)) {
    out.append(s.substr(last, pos - last));
    out.append(to);
    last = pos + from.size();
  }
  out.append(s.substr(last));
  return out;
}

}  // namespace baton
