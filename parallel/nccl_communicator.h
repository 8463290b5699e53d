// The GPU Communicator, on NCCL (built where CUDA and NCCL are found). Buffers are device
// memory; each call is enqueued on the communicator's stream and waited for with the
// communicator's timeout: a peer that died or hangs makes the call fail with
// DeadlineExceeded (the communicator is then aborted), never wait forever.
//
// NCCL sums in the order of its ring or tree, not in rank order: the rank-order promise
// of communicator.h holds for gloo only, so GPU groups do not claim bit-identical
// results across batch compositions when tp > 2.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "parallel/communicator.h"
#include "parallel/store.h"

namespace baton::parallel {

struct NcclOptions {
  int rank = 0;
  int size = 1;
  int device = 0;          // the CUDA device this rank uses
  Store* store = nullptr;  // rank 0 publishes the unique id here; the others read it
  std::string prefix = "world";
  std::chrono::milliseconds timeout{30000};
};

absl::StatusOr<std::unique_ptr<Communicator>> ConnectNccl(const NcclOptions& options);

}  // namespace baton::parallel
