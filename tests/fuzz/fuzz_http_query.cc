// Fuzzes ParseQuery, which reads the query string of any GET a client sends to the
// inspector's /inspect/plan. Whatever it accepts stays within the bound, names no
// parameter twice, and survives a round trip: every pair written back fully
// percent-encoded parses to the same pairs.
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>

#include "service/http_query.h"

namespace {

void Require(bool cond) {
  if (!cond) std::abort();
}

std::string Encode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    out.push_back('%');
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view query(reinterpret_cast<const char*>(data), size);
  constexpr size_t kMax = 8;
  auto params = baton::service::ParseQuery(query, kMax);
  if (!params.ok()) {
    Require(params.status().code() == absl::StatusCode::kInvalidArgument);
    Require(!params.status().message().empty());
    return 0;
  }
  Require(params->size() <= kMax);
  std::set<std::string> names;
  std::string again;
  for (const auto& [name, value] : *params) {
    Require(names.insert(name).second);
    Require(name.size() + value.size() <= query.size());  // decoding never grows
    if (!again.empty()) again.push_back('&');
    again += Encode(name) + "=" + Encode(value);
  }
  auto reparsed = baton::service::ParseQuery(again, kMax);
  Require(reparsed.ok());
  Require(*reparsed == *params);
  // The target's query is what follows the first '?'.
  Require(baton::service::QueryOf("/p?" + std::string(query)) == query);
  Require(baton::service::QueryOf("/p").empty());
  return 0;
}
