// UCX status codes as absl::Status: every UCX call goes through this one check.
#pragma once

#include <string_view>

#include "absl/status/status.h"
#include "ucs/type/status.h"

namespace baton::transport {

// OK for UCS_OK; otherwise a code that fits (UNAVAILABLE for an unreachable or failed
// peer, DEADLINE_EXCEEDED for a timeout, ...) with `what` and UCX's own message.
absl::Status UcxStatus(ucs_status_t status, std::string_view what);

}  // namespace baton::transport

#define BATON_UCX_RETURN_IF_ERROR(call, what)                        \
  do {                                                               \
    const ucs_status_t baton_ucx_status_ = (call);                   \
    if (baton_ucx_status_ != UCS_OK) {                               \
      return ::baton::transport::UcxStatus(baton_ucx_status_, what); \
    }                                                                \
  } while (0)
