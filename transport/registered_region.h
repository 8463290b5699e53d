// Memory registered with UCX once (ucp_mem_map), for the whole page pool: peers write
// into it with RMA puts through its packed remote key, or with put messages
// (put_message.h) where UCX has no native RMA to them. `memory_type` tells UCX where the
// memory lives, so that a CUDA-enabled UCX carries GPU pages without staging.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "transport/ucx_worker.h"

namespace baton::transport {

class RegisteredRegion {
 public:
  static absl::StatusOr<std::unique_ptr<RegisteredRegion>> Register(
      UcxWorker& ucx, void* base, size_t bytes,
      ucs_memory_type_t memory_type = UCS_MEMORY_TYPE_HOST);
  // Memory that UCX allocates and registers in one step (ucp_mem_map with ALLOCATE). UCX
  // takes it from the first allocation method that works (UCX_ALLOC_PRIO): shared memory
  // (sysv, posix, which start zeroed) first, falling back to private memory (the heap,
  // which need not be zeroed) when the context has no shared-memory transport; so that a peer on
  // this host with the shared-memory transports can write into it directly (one copy, no progress
  // needed here). Memory registered with Register() is reachable there only through emulated puts:
  // a copy into a bounce buffer, and another by this process's progress thread.
  static absl::StatusOr<std::unique_ptr<RegisteredRegion>> Allocate(UcxWorker& ucx, size_t bytes);
  ~RegisteredRegion();
  RegisteredRegion(const RegisteredRegion&) = delete;
  RegisteredRegion& operator=(const RegisteredRegion&) = delete;

  uint64_t base() const { return reinterpret_cast<uint64_t>(base_); }
  void* data() const { return base_; }
  size_t bytes() const { return bytes_; }
  ucp_mem_h memh() const { return memh_; }
  // The remote key a peer imports to write here (opaque bytes: the key of its messaged puts,
  // put_message.h, then UCX's packed remote key).
  const std::string& packed_rkey() const { return packed_rkey_; }

 private:
  RegisteredRegion() = default;
  // Fills packed_rkey_ from memh_.
  absl::Status PackKey();
  // Lets peers' put messages write this region (UcxWorker::put_targets).
  void AcceptPutMessages();
  UcxWorker* ucx_ = nullptr;
  void* base_ = nullptr;
  size_t bytes_ = 0;
  ucp_mem_h memh_ = nullptr;
  std::string packed_rkey_;
  uint64_t put_key_ = 0;  // 0: no put messages (memory that is not the host's)
};

}  // namespace baton::transport
