#include "frontdoor/openai/openai_error.h"

#include <string>

#include "absl/strings/cord.h"
#include "frontdoor/openai/openai_json.h"
#include "nlohmann/json.hpp"

namespace baton::frontdoor {
namespace {

ApiError Make(int http_status, std::string type, std::string code) {
  ApiError e;
  e.http_status = http_status;
  e.type = std::move(type);
  e.code = std::move(code);
  return e;
}

}  // namespace

ApiError ToApiError(const absl::Status& status) {
  ApiError e;
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition:
      e = Make(400, "invalid_request_error", "");
      break;
    case absl::StatusCode::kNotFound:
      e = Make(404, "invalid_request_error", "");
      break;
    case absl::StatusCode::kUnauthenticated:
      e = Make(401, "invalid_request_error", "invalid_api_key");
      break;
    case absl::StatusCode::kPermissionDenied:
      e = Make(403, "permission_error", "");
      break;
    case absl::StatusCode::kResourceExhausted:
      e = Make(429, "requests", "rate_limit_exceeded");
      break;
    case absl::StatusCode::kUnavailable:
      e = Make(503, "server_error", "");
      break;
    case absl::StatusCode::kDeadlineExceeded:
      e = Make(504, "server_error", "");
      break;
    case absl::StatusCode::kCancelled:
      e = Make(499, "invalid_request_error", "request_cancelled");
      break;
    default:
      e = Make(500, "server_error", "internal_error");
      break;
  }
  e.message = std::string(status.message());
  if (e.message.empty()) e.message = status.ok() ? "internal error: OK status" : "unknown error";
  e.param = ParamOf(status);
  return e;
}

std::string ErrorJson(const ApiError& error) {
  nlohmann::ordered_json inner = nlohmann::ordered_json::object();
  inner["message"] = error.message;
  inner["type"] = error.type;
  inner["param"] =
      error.param.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(error.param);
  inner["code"] =
      error.code.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(error.code);
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  out["error"] = std::move(inner);
  return DumpJson(out);
}

}  // namespace baton::frontdoor
