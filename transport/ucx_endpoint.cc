#include "transport/ucx_endpoint.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "common/status.h"
#include "common/strings.h"
#include "transport/stream_copy.h"
#include "transport/ucx_check.h"

namespace baton::transport {

RemoteRegion::~RemoteRegion() {
  if (rkey_ != nullptr) ucp_rkey_destroy(rkey_);
}

absl::StatusOr<std::unique_ptr<UcxEndpoint>> UcxEndpoint::Connect(UcxWorker& ucx,
                                                                  std::string_view peer_address) {
  if (peer_address.empty()) return absl::InvalidArgumentError("the peer's UCX address is empty");
  std::unique_ptr<UcxEndpoint> e(new UcxEndpoint(ucx));
  // UCX reads the address in place; a copy keeps it aligned and alive for the call.
  std::string address(peer_address);
  ucp_ep_params_t params = {};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address = reinterpret_cast<const ucp_address_t*>(address.data());
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = &UcxEndpoint::OnError;
  params.err_handler.arg = e.get();
  ucs_status_t s = ucp_ep_create(ucx.worker(), &params, &e->ep_);
  if (s == UCS_ERR_UNREACHABLE) {
    // Debian's shared-memory transports cannot detect a dead peer; there, only the
    // deadline of each wait ends an operation that a dead peer will never complete.
    params.err_mode = UCP_ERR_HANDLING_MODE_NONE;
    s = ucp_ep_create(ucx.worker(), &params, &e->ep_);
    e->detects_peer_failure_ = false;
  }
  BATON_UCX_RETURN_IF_ERROR(s, "connecting to the peer's UCX worker");
  ucx.Signal();
  return e;
}

UcxEndpoint::~UcxEndpoint() {
  if (ep_ == nullptr) return;
  ucp_request_param_t param = {};
  UcxCompletion* done = UcxCompletion::New();
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.send = &UcxCompletion::OnSend;
  param.user_data = done;
  // A failed peer cannot answer a flush: close at once.
  if (failed_status_.load() != UCS_OK) {
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_EP_CLOSE_FLAG_FORCE;
  }
  ucs_status_ptr_t request = ucp_ep_close_nbx(ep_, &param);
  if (request == nullptr) {
    done->Complete(UCS_OK);
  } else if (UCS_PTR_IS_ERR(request)) {
    done->Complete(UCS_PTR_STATUS(request));
  }
  ucx_.Signal();
  (void)done->WaitAndRelease(absl::Now() + absl::Seconds(1), "closing the UCX endpoint", ucx_);
}

void UcxEndpoint::OnError(void* arg, ucp_ep_h /*ep*/, ucs_status_t status) {
  int expected = UCS_OK;
  static_cast<UcxEndpoint*>(arg)->failed_status_.compare_exchange_strong(expected, status);
}

absl::Status UcxEndpoint::health() const {
  return UcxStatus(static_cast<ucs_status_t>(failed_status_.load()), "the UCX peer");
}

absl::StatusOr<std::unique_ptr<RemoteRegion>> UcxEndpoint::ImportRegion(
    std::string_view packed_rkey, uint64_t base, uint64_t bytes) {
  if (packed_rkey.empty()) return absl::InvalidArgumentError("the remote key is empty");
  if (bytes == 0 || base + bytes < base) {
    return absl::InvalidArgumentError(
        StrCat("remote region [", base, ", +", bytes, ") is empty or wraps around"));
  }
  std::unique_ptr<RemoteRegion> r(new RemoteRegion());
  r->base_ = base;
  r->bytes_ = bytes;
  std::string key(packed_rkey);
  BATON_UCX_RETURN_IF_ERROR(ucp_ep_rkey_unpack(ep_, key.data(), &r->rkey_),
                            "unpacking the peer's remote key");
  // Over shared memory the unpacked key has mapped the peer's segment here: a put is then
  // a copy, without UCX's per-operation cost (the runs of a transfer between different
  // slices are small). BATON_UCX_DIRECT_COPY=0 keeps every put a UCX put.
  const char* direct = std::getenv("BATON_UCX_DIRECT_COPY");
  void* mapped = nullptr;
  if ((direct == nullptr || std::string_view(direct) != "0") &&
      ucp_rkey_ptr(r->rkey_, base, &mapped) == UCS_OK) {
    r->mapped_ = static_cast<std::byte*>(mapped);
  }
  return r;
}

absl::Status UcxEndpoint::Put(const void* local, size_t bytes, const RemoteRegion& remote,
                              uint64_t offset, const RegisteredRegion* local_region) {
  BATON_RETURN_IF_ERROR(health());
  if (offset > remote.bytes() || bytes > remote.bytes() - offset) {
    return absl::OutOfRangeError(StrCat("a put of ", bytes, " bytes at offset ", offset,
                                        " does not fit the remote region of ", remote.bytes(),
                                        " bytes"));
  }
  if (bytes == 0) return absl::OkStatus();
  if (remote.mapped_ != nullptr) {
    StreamCopy(remote.mapped_ + offset, local, bytes);
    return absl::OkStatus();
  }
  ucp_request_param_t param = {};
  if (local_region != nullptr) {
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
    param.memh = local_region->memh();
  }
  ucs_status_ptr_t request =
      ucp_put_nbx(ep_, local, bytes, remote.base() + offset, remote.rkey_, &param);
  if (UCS_PTR_IS_ERR(request)) return UcxStatus(UCS_PTR_STATUS(request), "posting a UCX put");
  // No callback: a failed put fails the endpoint, which Flush reports.
  if (request != nullptr) {
    ucp_request_free(request);
    // It waits for progress: wake the progress thread. A put that completed in place
    // needs none (and a wake-up per put would cost more than a shared-memory put).
    ucx_.Signal();
  }
  return absl::OkStatus();
}

absl::Status UcxEndpoint::Flush(absl::Time deadline) {
  BATON_RETURN_IF_ERROR(health());
  // Direct copies are done; the completion message that follows a flush must not pass
  // them (their non-temporal stores are not ordered until this fence).
  StreamFence();
  UcxCompletion* done = UcxCompletion::New();
  ucp_request_param_t param = {};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.send = &UcxCompletion::OnSend;
  param.user_data = done;
  ucs_status_ptr_t request = ucp_ep_flush_nbx(ep_, &param);
  if (request == nullptr) {
    done->Complete(UCS_OK);
  } else if (UCS_PTR_IS_ERR(request)) {
    done->Complete(UCS_PTR_STATUS(request));
  }
  ucx_.Signal();
  BATON_RETURN_IF_ERROR(done->WaitAndRelease(deadline, "flushing the UCX puts", ucx_));
  return health();
}

}  // namespace baton::transport
