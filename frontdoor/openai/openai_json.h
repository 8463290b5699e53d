// JSON plumbing for the OpenAI front door: parsing untrusted request bodies into
// nlohmann::ordered_json without exceptions, and dumping responses whose strings may hold
// invalid UTF-8 (token text).
//
//   BATON_ASSIGN_OR_RETURN(nlohmann::ordered_json body,
//                          ParseJsonText(request_body, /*max_depth=*/64, "request body"));
//   std::string out = DumpJson(response);
//
// Why ordered_json: chat templates render `tools | tojson` and tool-call arguments in the
// client's key order (as transformers does), so the request keeps its key order.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace baton::frontdoor {

// Offset of the first byte of `text` that does not start or continue a valid UTF-8
// sequence, or std::string_view::npos when all of it is valid.
size_t FirstInvalidUtf8(std::string_view text);

// Parses `text` as one JSON value. `what` names the text in errors ("request body").
// Errors (InvalidArgument): invalid UTF-8 ("<what> is not valid UTF-8 at byte N"), empty
// text, a syntax error ("<what> is not valid JSON: <parser message> (byte N)"), or nesting
// deeper than `max_depth` arrays/objects. Runs in time linear in the text: duplicate object
// keys keep their first position and their last value, as Python's json does.
absl::StatusOr<nlohmann::ordered_json> ParseJsonText(std::string_view text, int max_depth,
                                                     std::string_view what);

// Compact JSON; invalid UTF-8 in strings becomes U+FFFD instead of throwing.
std::string DumpJson(const nlohmann::ordered_json& value);

// "null", "boolean", "number", "string", "array" or "object", for messages.
std::string_view JsonTypeName(const nlohmann::ordered_json& value);

}  // namespace baton::frontdoor
