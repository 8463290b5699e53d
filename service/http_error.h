// Error bodies in OpenAI's envelope, which OpenAI clients parse and show to the user:
//   {"error":{"message":"...","type":"invalid_request_error","param":null,"code":null}}
#pragma once

#include <string>
#include <string_view>

namespace baton::service {

// `type` is "invalid_request_error" for the client's mistakes and "server_error" for ours.
std::string OpenAiErrorJson(std::string_view message,
                            std::string_view type = "invalid_request_error");

// `s` as a JSON string literal, quotes included. Invalid UTF-8 becomes U+FFFD, so the output
// is always valid JSON even when the message quotes the client's bytes.
std::string JsonQuote(std::string_view s);

}  // namespace baton::service
