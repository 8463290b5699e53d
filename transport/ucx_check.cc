#include "transport/ucx_check.h"

#include "common/strings.h"

namespace baton::transport {

absl::Status UcxStatus(ucs_status_t status, std::string_view what) {
  if (status == UCS_OK) return absl::OkStatus();
  const std::string message = StrCat(what, ": UCX: ", ucs_status_string(status));
  switch (status) {
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_REJECTED:
    case UCS_ERR_NOT_CONNECTED:
    case UCS_ERR_IO_ERROR:
      return absl::UnavailableError(message);
    case UCS_ERR_TIMED_OUT:
      return absl::DeadlineExceededError(message);
    case UCS_ERR_CANCELED:
      return absl::CancelledError(message);
    case UCS_ERR_NO_MEMORY:
    case UCS_ERR_NO_RESOURCE:
    case UCS_ERR_EXCEEDS_LIMIT:
      return absl::ResourceExhaustedError(message);
    case UCS_ERR_INVALID_PARAM:
    case UCS_ERR_INVALID_ADDR:
    case UCS_ERR_OUT_OF_RANGE:
      return absl::InvalidArgumentError(message);
    case UCS_ERR_UNSUPPORTED:
    case UCS_ERR_NO_DEVICE:
      return absl::FailedPreconditionError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace baton::transport
