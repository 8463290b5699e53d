// API-key checks for the front door: `Authorization: Bearer <key>`, as OpenAI clients send it.
#pragma once

#include <string_view>

namespace baton::service {

// True when `authorization` (the header's value) is "Bearer <key>" with the scheme in any
// case and `<key>` equal to `api_key`. The comparison takes time that depends on the length of
// what the client sent, never on where it differs from the key. An empty `api_key` matches
// nothing: whether auth is required at all is the caller's decision.
bool BearerTokenMatches(std::string_view authorization, std::string_view api_key);

}  // namespace baton::service
