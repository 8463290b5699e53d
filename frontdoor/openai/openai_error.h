// Errors of the OpenAI front door: how a Status becomes OpenAI's error envelope (the
// parameter it names, common/param_error.h, becomes `param`).
//
//   return ParamError("temperature", "'temperature' must be a number, got string");
//   ...
//   ApiError e = ToApiError(status);
//   Reply(e.http_status, ErrorJson(e));
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "common/param_error.h"

namespace baton::frontdoor {

using ::baton::ParamError;
using ::baton::ParamOf;

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
