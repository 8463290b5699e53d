#include "service/api_key.h"

#include <cstddef>

namespace baton::service {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = (a[i] >= 'A' && a[i] <= 'Z') ? static_cast<char>(a[i] - 'A' + 'a') : a[i];
    if (x != b[i]) return false;
  }
  return true;
}

// Visits every byte of `given` whatever it holds, so the time reveals only given's length.
bool ConstantTimeEquals(std::string_view given, std::string_view key) {
  volatile unsigned char diff = given.size() == key.size() ? 0 : 1;
  for (size_t i = 0; i < given.size(); ++i) {
    diff = diff | static_cast<unsigned char>(given[i] ^ key[i % key.size()]);
  }
  return diff == 0;
}

}  // namespace

bool BearerTokenMatches(std::string_view authorization, std::string_view api_key) {
  if (api_key.empty()) return false;
  std::string_view value = Trim(authorization);
  size_t space = value.find_first_of(" \t");
  if (space == std::string_view::npos) return false;
  if (!EqualsIgnoreCase(value.substr(0, space), "bearer")) return false;
  std::string_view token = Trim(value.substr(space));
  if (token.empty()) return false;
  return ConstantTimeEquals(token, api_key);
}

}  // namespace baton::service
