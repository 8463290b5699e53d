// The process's UCX: one UCP context and one UCP worker, progressed by a thread of its own
// that sleeps on the worker's event descriptor when there is nothing to do. Other threads
// post operations (the worker is thread-safe, UCS_THREAD_MODE_MULTI) and wait for them
// with Wait(), which never waits longer than its deadline.
//
//   BATON_ASSIGN_OR_RETURN(auto ucx, UcxWorker::Create({.transports = "tcp"}));
//   std::string me = ucx->address();          // what a peer needs to reach this worker
//
// Transports come from `transports` when set, else from UCX_TLS, as UCX users expect.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "transport/put_message.h"
#include "ucp/api/ucp.h"

namespace baton::transport {

struct UcxOptions {
  std::string transports;  // UCX_TLS syntax ("tcp", "posix,cma", "sm", ...); empty: UCX_TLS
  // UCX_NET_DEVICES syntax ("lo", "eth0,mlx5_0:1"; NetDevicesFor). Empty, or when the
  // UCX_NET_DEVICES variable is set (the operator's choice wins): UCX's.
  std::string net_devices = {};
  // Whether puts into peers' memory that is not mapped here go as messages (put_message.h)
  // rather than UCX puts. Unset: BATON_UCX_PUT_MESSAGES (1 or 0) when set, else yes when UCX
  // may not use RDMA (no RDMA port on this host, or `transports` names none), where UCX's
  // own puts would be emulated with messages anyway.
  std::optional<bool> puts_as_messages = std::nullopt;
};

class UcxWorker;

// Whether UCX may choose a shared-memory transport for `transports` (UCX_TLS syntax;
// empty: the UCX_TLS variable, and when that is unset too, UCX's choice, which includes
// shared memory).
bool MayUseSharedMemory(std::string_view transports);

// Whether UCX may choose an RDMA transport (rc, dc, ud and their variants, ib) for
// `transports`, read as MayUseSharedMemory reads it. This says nothing of the devices.
bool MayUseRdma(std::string_view transports);

// Sends a FenceHeader message (put_message.h) of `id` with `sequence`, eager, plus
// `flags` (UCP_AM_SEND_FLAG_*). UCS_OK once sent or posted; else UCX's error.
ucs_status_t SendFenceMessage(ucp_ep_h ep, unsigned id, uint64_t sequence, uint32_t flags);

// The outcome of one UCX operation, shared by the poster and UCX's callback. The poster
// waits with WaitAndRelease(); if it gives up first, the UcxWorker keeps the completion
// until it is destroyed (the callback may come late, or never, for a dead peer).
class UcxCompletion {
 public:
  static UcxCompletion* New() { return new UcxCompletion(); }
  // UCX's send callback (user_data is the completion); it frees the request. A poster
  // that gets a request back must not free it.
  static void OnSend(void* request, ucs_status_t status, void* user_data);
  // Marks it done now (an operation that completed at once, or failed to post).
  void Complete(ucs_status_t status);
  // Waits until done or `deadline`; then the caller must not touch it again (it is freed
  // here, or handed to `owner`). DeadlineExceeded names `what`.
  absl::Status WaitAndRelease(absl::Time deadline, const std::string& what, UcxWorker& owner);

 private:
  UcxCompletion() = default;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  ucs_status_t status_ = UCS_OK;
};

class UcxWorker {
 public:
  static absl::StatusOr<std::unique_ptr<UcxWorker>> Create(const UcxOptions& options);
  ~UcxWorker();
  UcxWorker(const UcxWorker&) = delete;
  UcxWorker& operator=(const UcxWorker&) = delete;

  ucp_context_h context() const { return context_; }
  ucp_worker_h worker() const { return worker_; }
  // This worker's address (opaque bytes) for peers' endpoints.
  const std::string& address() const { return address_; }
  // The transports UCX was asked for ("" when left to UCX_TLS or UCX's default).
  const std::string& transports() const { return transports_; }

  // Wakes the progress thread: call after posting an operation from another thread.
  void Signal();
  // Keeps a completion whose poster stopped waiting, until the worker is destroyed.
  void Adopt(UcxCompletion* completion);

  // Whether endpoints send puts into unmapped peer memory as messages (UcxOptions).
  bool puts_as_messages() const { return puts_as_messages_; }
  // The regions of this process that peers' messaged puts may write.
  PutTargets& put_targets() { return put_targets_; }
  // Put messages refused so far (an unknown key, or bytes past a region's end).
  uint64_t refused_put_messages() const { return refused_put_messages_.load(); }

  // Fences (UcxEndpoint::Flush of messaged puts): OpenFence keeps `done` under a new
  // sequence number until the peer's answer completes it (UCS_OK), or EndFence(sequence,
  // an error) does, or ForgetFence drops it (its poster stopped waiting).
  uint64_t OpenFence(UcxCompletion* done);
  void EndFence(uint64_t sequence, ucs_status_t status);
  void ForgetFence(uint64_t sequence);

 private:
  UcxWorker() = default;
  void Progress();

  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  std::string address_;
  std::string transports_;
  int event_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::thread progress_;
  std::mutex adopted_mu_;
  std::vector<UcxCompletion*> adopted_;

  // The receiving side of put_message.h, on the progress thread.
  static ucs_status_t OnPutMessage(void* arg, const void* header, size_t header_length, void* data,
                                   size_t length, const ucp_am_recv_param_t* param);
  static ucs_status_t OnFence(void* arg, const void* header, size_t header_length, void* data,
                              size_t length, const ucp_am_recv_param_t* param);
  static ucs_status_t OnFenceAck(void* arg, const void* header, size_t header_length, void* data,
                                 size_t length, const ucp_am_recv_param_t* param);
  absl::Status SetMessageHandlers();

  bool puts_as_messages_ = false;
  PutTargets put_targets_;
  std::atomic<uint64_t> refused_put_messages_{0};
  std::mutex fences_mu_;
  uint64_t next_fence_ = 1;
  std::unordered_map<uint64_t, UcxCompletion*> fences_;
};

}  // namespace baton::transport
