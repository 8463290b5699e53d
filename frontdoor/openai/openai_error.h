// Errors of the OpenAI front door: how a Status names the offending request parameter, and
// how a Status becomes OpenAI's error envelope.
//
//   return ParamError("temperature", "'temperature' must be a number, got string");
//   ...
//   ApiError e = ToApiError(status);
//   Reply(e.http_status, ErrorJson(e));
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace baton::frontdoor {

// Status payload key whose value is the request parameter an error is about.
inline constexpr std::string_view kParamPayloadKey = "baton.param";

// InvalidArgument(message) carrying `param` (e.g. "messages[2].content") as its payload.
absl::Status ParamError(std::string_view param, std::string_view message);

// The parameter a status names, or "" when none.
std::string ParamOf(const absl::Status& status);

// OpenAI's error envelope: {"error": {"message", "type", "param", "code"}}.
struct ApiError {
  int http_status = 500;
  std::string type;
  std::string message;
  std::string param;  // "" is written as null
  std::string code;   // "" is written as null
};

// InvalidArgument, OutOfRange, FailedPrecondition: 400 invalid_request_error.
// NotFound: 404 invalid_request_error. Unauthenticated: 401 invalid_request_error with code
// invalid_api_key. PermissionDenied: 403 permission_error. ResourceExhausted: 429 with
// OpenAI's rate-limit shape (type "requests", code "rate_limit_exceeded"). Unavailable: 503,
// DeadlineExceeded: 504, others: 500, all type server_error (500 has code internal_error).
// Cancelled: 499 (nginx's "client closed request"; the client rarely reads it).
// An OK status is a programming error and maps to 500.
ApiError ToApiError(const absl::Status& status);

std::string ErrorJson(const ApiError& error);

}  // namespace baton::frontdoor
