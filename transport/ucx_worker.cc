#include "transport/ucx_worker.h"

#include <poll.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>

#include "common/strings.h"
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

bool MayUseSharedMemory(std::string_view transports) {
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
    named = named || name == "sm" || name == "shm" || name == "posix" || name == "sysv" ||
            (!excluding && name == "all");
    start = comma + 1;
  }
  return excluding ? !named : named;
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
  ucp_params_t params = {};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_RMA | UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 1;
  const ucs_status_t init = ucp_init(&params, config, &w->context_);
  ucp_config_release(config);
  BATON_UCX_RETURN_IF_ERROR(init, "creating the UCP context (check UCX_TLS)");

  ucp_worker_params_t wp = {};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_MULTI;
  BATON_UCX_RETURN_IF_ERROR(ucp_worker_create(w->context_, &wp, &w->worker_),
                            "creating the UCP worker");
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

}  // namespace baton::transport
