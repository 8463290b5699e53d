#include "transport/ucx_worker.h"

#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <thread>
#include <utility>

#include "common/log.h"
#include "common/status.h"
#include "common/strings.h"
#include "transport/net_devices.h"
#include "transport/ucx_check.h"

namespace baton::transport {

void UcxCompletion::OnSend(void* request, ucs_status_t status, void* user_data) {
  // The poster keeps the request (freeing it would cancel this callback); it ends here.
  ucp_request_free(request);
  static_cast<UcxCompletion*>(user_data)->Complete(status);
}

void UcxCompletion::Complete(ucs_status_t status) {
  std::lock_guard<std::mutex> lock(mu_);
  done_ = true;
  status_ = status;
  cv_.notify_all();
}

absl::Status UcxCompletion::WaitAndRelease(absl::Time deadline, const std::string& what,
                                           UcxWorker& owner) {
  ucs_status_t status = UCS_OK;
  {
    std::unique_lock<std::mutex> lock(mu_);
    const bool done = cv_.wait_until(lock, absl::ToChronoTime(deadline), [this] { return done_; });
    if (!done) {
      lock.unlock();
      owner.Adopt(this);  // the callback may still come, or never (a dead peer)
      return absl::DeadlineExceededError(StrCat(what, " did not complete in time"));
    }
    status = status_;
  }
  delete this;
  return UcxStatus(status, what);
}

namespace {

// Whether UCX may choose one of `names` for `transports` (UCX_TLS syntax; empty: the
// UCX_TLS variable, and when that is unset too, UCX's choice: all of them).
bool MayUseAnyOf(std::string_view transports, std::initializer_list<std::string_view> names) {
  std::string tls(transports);
  if (tls.empty()) {
    const char* env = std::getenv("UCX_TLS");
    tls = env == nullptr ? "" : env;
  }
  if (tls.empty()) return true;
  const bool excluding = tls[0] == '^';  // UCX_TLS=^a,b: everything but a and b
  bool named = false;
  size_t start = excluding ? 1 : 0;
  while (start <= tls.size()) {
    size_t comma = tls.find(',', start);
    if (comma == std::string::npos) comma = tls.size();
    const std::string_view name(tls.data() + start, comma - start);
    named = named || std::find(names.begin(), names.end(), name) != names.end() ||
            (!excluding && name == "all");
    start = comma + 1;
  }
  return excluding ? !named : named;
}

bool PutsAsMessages(const UcxOptions& options) {
  if (options.puts_as_messages.has_value()) return *options.puts_as_messages;
  if (const char* env = std::getenv("BATON_UCX_PUT_MESSAGES"); env != nullptr && *env != 0) {
    return std::string_view(env) != "0";
  }
  return !MayUseRdma(options.transports) || RdmaPorts().empty();
}

}  // namespace

bool MayUseSharedMemory(std::string_view transports) {
  return MayUseAnyOf(transports, {"sm", "shm", "posix", "sysv"});
}

bool MayUseRdma(std::string_view transports) {
  return MayUseAnyOf(transports, {"ib", "rc", "rc_v", "rc_verbs", "rc_x", "rc_mlx5", "dc", "dc_x",
                                  "dc_mlx5", "ud", "ud_v", "ud_verbs", "ud_x", "ud_mlx5"});
}

absl::StatusOr<std::unique_ptr<UcxWorker>> UcxWorker::Create(const UcxOptions& options) {
  std::unique_ptr<UcxWorker> w(new UcxWorker());
  w->transports_ = options.transports;
  ucp_config_t* config = nullptr;
  BATON_UCX_RETURN_IF_ERROR(ucp_config_read(nullptr, nullptr, &config), "reading UCX's config");
  if (!options.transports.empty()) {
    const ucs_status_t s = ucp_config_modify(config, "TLS", options.transports.c_str());
    if (s != UCS_OK) {
      ucp_config_release(config);
      return UcxStatus(s, StrCat("UCX transports '", options.transports, "'"));
    }
  }
  if (!options.net_devices.empty() && std::getenv("UCX_NET_DEVICES") == nullptr) {
    const ucs_status_t s = ucp_config_modify(config, "NET_DEVICES", options.net_devices.c_str());
    if (s != UCS_OK) {
      ucp_config_release(config);
      return UcxStatus(s, StrCat("UCX network devices '", options.net_devices, "'"));
    }
  }
  w->puts_as_messages_ = PutsAsMessages(options);
  // A fence is answered after every earlier put message was written only if all of an
  // endpoint's eager fragments travel on one lane, in order (put_message.h). 1 is UCX's
  // default; an operator's UCX_MAX_EAGER_RAILS is overridden here.
  if (w->puts_as_messages_) {
    const ucs_status_t s = ucp_config_modify(config, "MAX_EAGER_RAILS", "1");
    if (s != UCS_OK) {
      ucp_config_release(config);
      return UcxStatus(s, "UCX's MAX_EAGER_RAILS");
    }
  }
  ucp_params_t params = {};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  // RMA for UCX's puts, AM for messaged puts (put_message.h).
  params.features = UCP_FEATURE_RMA | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 1;
  const ucs_status_t init = ucp_init(&params, config, &w->context_);
  ucp_config_release(config);
  BATON_UCX_RETURN_IF_ERROR(init, "creating the UCP context (check UCX_TLS)");

  ucp_worker_params_t wp = {};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_MULTI;
  BATON_UCX_RETURN_IF_ERROR(ucp_worker_create(w->context_, &wp, &w->worker_),
                            "creating the UCP worker");
  BATON_RETURN_IF_ERROR(w->SetMessageHandlers());
  ucp_address_t* address = nullptr;
  size_t length = 0;
  BATON_UCX_RETURN_IF_ERROR(ucp_worker_get_address(w->worker_, &address, &length),
                            "reading the UCP worker's address");
  w->address_.assign(reinterpret_cast<const char*>(address), length);
  ucp_worker_release_address(w->worker_, address);
  BATON_UCX_RETURN_IF_ERROR(ucp_worker_get_efd(w->worker_, &w->event_fd_),
                            "reading the UCP worker's event descriptor");
  UcxWorker* self = w.get();
  w->progress_ = std::thread([self] { self->Progress(); });
  return w;
}

UcxWorker::~UcxWorker() {
  if (progress_.joinable()) {
    stopping_.store(true);
    Signal();
    progress_.join();
  }
  if (worker_ != nullptr) ucp_worker_destroy(worker_);  // no callback runs after this
  if (context_ != nullptr) ucp_cleanup(context_);
  for (UcxCompletion* c : adopted_) delete c;
}

void UcxWorker::Adopt(UcxCompletion* completion) {
  std::lock_guard<std::mutex> lock(adopted_mu_);
  adopted_.push_back(completion);
}

void UcxWorker::Signal() {
  if (worker_ != nullptr) ucp_worker_signal(worker_);
}

void UcxWorker::Progress() {
  // Spin while there is traffic, then sleep on the event descriptor. Not every transport
  // signals it (Debian's shared memory does not), so the sleep is short: a message that
  // arrives without a wake-up waits at most kSleep. During a transfer the receiver never
  // sleeps, since its side of an emulated put needs progress here.
  constexpr auto kSpin = std::chrono::milliseconds(2);
  constexpr int kSleepMs = 5;
  auto last_work = std::chrono::steady_clock::now();
  while (!stopping_.load()) {
    if (ucp_worker_progress(worker_) != 0) {
      last_work = std::chrono::steady_clock::now();
      continue;
    }
    if (std::chrono::steady_clock::now() - last_work < kSpin) {
      // Spinning, but not at the cost of a thread that has work: with more busy threads
      // than cores (a sender rank and its receivers on one host) the spin otherwise takes
      // the core from the thread that posts the puts.
      std::this_thread::yield();
      continue;
    }
    // Arm, then sleep until UCX has work, Signal() or kSleepMs; BUSY means events came.
    if (ucp_worker_arm(worker_) == UCS_ERR_BUSY) continue;
    pollfd p{event_fd_, POLLIN, 0};
    // Spin a little after a wake-up with an event, but not after a timeout: an idle
    // worker then costs one progress call per kSleepMs, not kSpin of every kSleepMs + kSpin
    // (a quarter of a core).
    if (::poll(&p, 1, kSleepMs) > 0) last_work = std::chrono::steady_clock::now();
  }
}

absl::Status UcxWorker::SetMessageHandlers() {
  const struct {
    unsigned id;
    ucp_am_recv_callback_t cb;
  } handlers[] = {{kPutMessageId, &UcxWorker::OnPutMessage},
                  {kFenceId, &UcxWorker::OnFence},
                  {kFenceAckId, &UcxWorker::OnFenceAck}};
  for (const auto& h : handlers) {
    ucp_am_handler_param_t p = {};
    p.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                   UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
    p.id = h.id;
    p.flags = UCP_AM_FLAG_WHOLE_MSG;
    p.cb = h.cb;
    p.arg = this;
    BATON_UCX_RETURN_IF_ERROR(ucp_worker_set_am_recv_handler(worker_, &p),
                              "setting the UCX active-message handlers");
  }
  return absl::OkStatus();
}

ucs_status_t UcxWorker::OnPutMessage(void* arg, const void* header, size_t header_length,
                                     void* data, size_t length, const ucp_am_recv_param_t* param) {
  auto* self = static_cast<UcxWorker*>(arg);
  // Baton's senders force eager messages; a rendezvous one did not come from them: refuse it
  // (its sender's send fails with this status).
  absl::Status s = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0
                       ? absl::InvalidArgumentError("a put message came by rendezvous")
                       : self->put_targets_.Write(header, header_length, data, length);
  if (s.ok()) return UCS_OK;
  // A peer with a stale or forged key, or a bug: the bytes are dropped, never written out of
  // place. The first few are logged; the count is kept.
  if (self->refused_put_messages_.fetch_add(1) < 8) LogWarn("UCX: refused %s", s.message());
  return (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0 ? UCS_ERR_REJECTED : UCS_OK;
}

ucs_status_t SendFenceMessage(ucp_ep_h ep, unsigned id, uint64_t sequence, uint32_t flags) {
  auto* header = new FenceHeader{sequence};  // UCX reads it until the send completes
  ucp_request_param_t p = {};
  p.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  p.cb.send = [](void* request, ucs_status_t /*status*/, void* user_data) {
    delete static_cast<FenceHeader*>(user_data);
    ucp_request_free(request);
  };
  p.user_data = header;
  p.flags = UCP_AM_SEND_FLAG_EAGER | flags;
  ucs_status_ptr_t request = ucp_am_send_nbx(ep, id, header, sizeof(*header), nullptr, 0, &p);
  if (UCS_PTR_IS_PTR(request)) return UCS_OK;  // posted: the callback frees the header
  delete header;                               // sent at once, or failed: no callback comes
  return UCS_PTR_STATUS(request);
}

ucs_status_t UcxWorker::OnFence(void* /*arg*/, const void* header, size_t header_length,
                                void* /*data*/, size_t /*length*/,
                                const ucp_am_recv_param_t* param) {
  // Messages on one endpoint are handled in order: every put sent before this fence has
  // been written by now. Answer on the sender's endpoint (a send from a handler is allowed;
  // only progress is not). A dead sender fails the send, which is then dropped.
  FenceHeader h;
  if (header_length != sizeof(h) || (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) == 0 ||
      param->reply_ep == nullptr) {
    return UCS_OK;
  }
  std::memcpy(&h, header, sizeof(h));
  (void)SendFenceMessage(param->reply_ep, kFenceAckId, h.sequence, 0);
  return UCS_OK;
}

ucs_status_t UcxWorker::OnFenceAck(void* arg, const void* header, size_t header_length,
                                   void* /*data*/, size_t /*length*/,
                                   const ucp_am_recv_param_t* /*param*/) {
  FenceHeader h;
  if (header_length != sizeof(h)) return UCS_OK;
  std::memcpy(&h, header, sizeof(h));
  static_cast<UcxWorker*>(arg)->EndFence(h.sequence, UCS_OK);
  return UCS_OK;
}

uint64_t UcxWorker::OpenFence(UcxCompletion* done) {
  std::lock_guard<std::mutex> lock(fences_mu_);
  const uint64_t sequence = next_fence_++;
  fences_.emplace(sequence, done);
  return sequence;
}

void UcxWorker::EndFence(uint64_t sequence, ucs_status_t status) {
  std::lock_guard<std::mutex> lock(fences_mu_);
  const auto it = fences_.find(sequence);
  if (it == fences_.end()) return;  // answered already, or its poster gave up
  it->second->Complete(status);
  fences_.erase(it);
}

void UcxWorker::ForgetFence(uint64_t sequence) {
  std::lock_guard<std::mutex> lock(fences_mu_);
  fences_.erase(sequence);
}

}  // namespace baton::transport
