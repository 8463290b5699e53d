#include "transport/ucx_endpoint.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "common/status.h"
#include "common/strings.h"
#include "transport/put_message.h"
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
  auto* self = static_cast<UcxEndpoint*>(arg);
  int expected = UCS_OK;
  self->failed_status_.compare_exchange_strong(expected, status);
  // A fence's answer will not come from a failed peer: end its wait now.
  std::lock_guard<std::mutex> lock(self->fences_mu_);
  for (uint64_t sequence : self->open_fences_) self->ucx_.EndFence(sequence, status);
}

absl::Status UcxEndpoint::health() const {
  BATON_RETURN_IF_ERROR(
      UcxStatus(static_cast<ucs_status_t>(failed_status_.load()), "the UCX peer"));
  return UcxStatus(static_cast<ucs_status_t>(send_status_->load()), "sending a put message");
}

absl::StatusOr<std::unique_ptr<RemoteRegion>> UcxEndpoint::ImportRegion(
    std::string_view packed_rkey, uint64_t base, uint64_t bytes) {
  if (packed_rkey.empty()) return absl::InvalidArgumentError("the remote key is empty");
  BATON_ASSIGN_OR_RETURN(const RegionKey region_key, ParseRegionKey(packed_rkey));
  if (bytes == 0 || base + bytes < base) {
    return absl::InvalidArgumentError(
        StrCat("remote region [", base, ", +", bytes, ") is empty or wraps around"));
  }
  std::unique_ptr<RemoteRegion> r(new RemoteRegion());
  r->base_ = base;
  r->bytes_ = bytes;
  std::string key(region_key.ucx);
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
  // Messages where UCX would emulate its put with messages it must answer (ucx_worker.h);
  // not to a shared-memory-only peer (no peer failure handling), where its puts are copies.
  if (r->mapped_ == nullptr && ucx_.puts_as_messages() && detects_peer_failure_ &&
      region_key.put_key != 0) {
    // A message's offset counts from the registered region's start, a UCX put's address
    // from `base`: the imported range must lie inside the region that was registered.
    if (base < region_key.base) {
      return absl::InvalidArgumentError(StrCat("remote region [", base, ", +", bytes,
                                               ") starts before its registration at ",
                                               region_key.base));
    }
    r->put_key_ = region_key.put_key;
    r->put_offset_ = base - region_key.base;
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
  if (remote.messaged()) return PutMessage(local, bytes, remote, offset);
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

namespace {

// A put message's header, alive until UCX has sent it, and where a failed send is noted.
struct PutInFlight {
  PutMessageHeader header;
  std::shared_ptr<std::atomic<int>> send_status;
};

void OnPutMessageSent(void* request, ucs_status_t status, void* user_data) {
  auto* p = static_cast<PutInFlight*>(user_data);
  int expected = UCS_OK;
  if (status != UCS_OK) p->send_status->compare_exchange_strong(expected, status);
  delete p;
  ucp_request_free(request);
}

}  // namespace

absl::Status UcxEndpoint::PutMessage(const void* local, size_t bytes, const RemoteRegion& remote,
                                     uint64_t offset) {
  auto* p = new PutInFlight{{remote.put_key_, remote.put_offset_ + offset}, send_status_};
  ucp_request_param_t param = {};
  param.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  param.cb.send = &OnPutMessageSent;
  param.user_data = p;
  // Eager: the peer's handler then holds every byte and copies it in order with the
  // fence that follows (rendezvous would land later, and the peer refuses it).
  param.flags = UCP_AM_SEND_FLAG_EAGER;
  sent_messages_.store(true);
  ucs_status_ptr_t request =
      ucp_am_send_nbx(ep_, kPutMessageId, &p->header, sizeof(p->header), local, bytes, &param);
  if (!UCS_PTR_IS_PTR(request)) {  // sent at once, or failed to post: no callback comes
    delete p;
    if (UCS_PTR_IS_ERR(request)) return UcxStatus(UCS_PTR_STATUS(request), "posting a put message");
    return absl::OkStatus();
  }
  ucx_.Signal();
  return absl::OkStatus();
}

absl::Status UcxEndpoint::Fence(absl::Time deadline) {
  UcxCompletion* answered = UcxCompletion::New();
  const uint64_t sequence = ucx_.OpenFence(answered);
  {
    std::lock_guard<std::mutex> lock(fences_mu_);
    open_fences_.push_back(sequence);
  }
  // The peer may have failed before the fence was open: OnError then missed it.
  if (failed_status_.load() != UCS_OK) {
    ucx_.EndFence(sequence, static_cast<ucs_status_t>(failed_status_.load()));
  }
  const ucs_status_t sent = SendFenceMessage(ep_, kFenceId, sequence, UCP_AM_SEND_FLAG_REPLY);
  if (sent != UCS_OK) ucx_.EndFence(sequence, sent);
  ucx_.Signal();
  absl::Status s = answered->WaitAndRelease(deadline, "the peer's answer to a fence", ucx_);
  ucx_.ForgetFence(sequence);
  std::lock_guard<std::mutex> lock(fences_mu_);
  open_fences_.erase(std::find(open_fences_.begin(), open_fences_.end(), sequence));
  return s;
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
  BATON_RETURN_IF_ERROR(health());
  // Every flush after the first put message fences: another thread's fence may have been
  // sent before this thread's puts, so whether "one was sent since" says nothing here.
  if (sent_messages_.load()) BATON_RETURN_IF_ERROR(Fence(deadline));
  return health();
}

}  // namespace baton::transport
