// The CPU Communicator, on gloo (PyTorch's CPU collectives) over TCP. Why gloo and not
// OpenMPI: docs/parallel.md (a group starts with no external launcher, every call takes a
// timeout, and a dead peer is an error rather than a job abort).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "parallel/communicator.h"
#include "parallel/store.h"

namespace baton::parallel {

struct GlooOptions {
  int rank = 0;
  int size = 1;
  Store* store = nullptr;  // outlives the connect call
  // Separates several groups that meet through one store ("world", "tp0", "pp1"...).
  std::string prefix = "world";
  // The address this rank's gloo listener binds to: the interface the group talks over.
  std::string address = "127.0.0.1";
  std::chrono::milliseconds timeout{30000};  // every call, and the rendezvous unless:
  // How long the rendezvous waits for the other ranks (0: `timeout`). Ranks on several
  // hosts start at different times and each loads its shard first.
  std::chrono::milliseconds rendezvous_timeout{0};
};

// Every rank of the group calls this with the same store, prefix and size; it returns
// once all of them are connected. DeadlineExceeded when some rank does not show up in
// time; InvalidArgument for a bad rank or size.
absl::StatusOr<std::unique_ptr<Communicator>> ConnectGloo(const GlooOptions& options);

}  // namespace baton::parallel
