// The query string of a request target ("/inspect/plan?device=h200&tp=2"), parsed as an
// HTML form does: name=value pairs split on '&', '+' for a space, %XX escapes decoded.
// Untrusted bytes: fuzzed by tests/fuzz/fuzz_http_query.cc.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace baton::service {

using QueryParams = std::vector<std::pair<std::string, std::string>>;

// What follows the first '?' of `target` ("" when none).
std::string_view QueryOf(std::string_view target);

// The pairs in order; a name without '=' has an empty value, and empty pieces ("a=1&&b=2")
// are skipped. InvalidArgument for a '%' not followed by two hex digits, a name that
// appears twice, or more than `max_params` pairs (naming the bound).
absl::StatusOr<QueryParams> ParseQuery(std::string_view query, size_t max_params);

}  // namespace baton::service
