// The collectives a worker group needs, behind one interface: a CPU implementation on
// gloo (gloo_communicator.h) and an NCCL one on GPUs (nccl_communicator.h).
//
//   BATON_ASSIGN_OR_RETURN(auto comm, ConnectGloo(options));  // every rank calls this
//   BATON_RETURN_IF_ERROR(comm->AllReduceSum(partial));        // now the group's sum
//
// Every call is collective over the group (Send/Recv over the pair) and bounded by the
// communicator's timeout: a peer that died, hangs or never calls makes the call fail
// with DeadlineExceeded or Unavailable, never wait forever. After such an error the
// communicator is broken: every later call fails at once, and the group must be rebuilt.
//
// Sums are in rank order: element i of the result is ((x0 + x1) + x2) + ... for the
// ranks' values x_r, whatever the buffer's length or the element's place in it, so a
// result never depends on what else is in the buffer (the engine's batch invariance).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace baton::parallel {

// A posted send or receive; Wait returns once it is done (its buffer is free again), or
// with the communicator's error. Must be waited before it is destroyed.
class Pending {
 public:
  virtual ~Pending() = default;
  virtual absl::Status Wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::chrono::milliseconds timeout() const = 0;
  // "gloo" or "nccl"; for logs and benchmarks.
  virtual const char* backend() const = 0;

  // data = the sum over ranks of every rank's data, in place. Same length on every rank.
  virtual absl::Status AllReduceSum(std::span<float> data) = 0;
  // bf16 values (raw bits); each sum is taken in f32 and rounded to nearest even once per
  // addition, in rank order.
  virtual absl::Status AllReduceSumBf16(std::span<uint16_t> data) = 0;
  // out = every rank's `in` in rank order; out.size() == size() * in.size().
  virtual absl::Status AllGather(std::span<const std::byte> in, std::span<std::byte> out) = 0;
  // data = root's data on every rank.
  virtual absl::Status Broadcast(std::span<std::byte> data, int root) = 0;
  // Point to point (pipeline stages). A Send matches the Recv of the same tag on `peer`,
  // of the same length; messages of one tag between two ranks arrive in order.
  virtual absl::Status Send(std::span<const std::byte> data, int peer, uint32_t tag) = 0;
  virtual absl::Status Recv(std::span<std::byte> data, int peer, uint32_t tag) = 0;
  // The same, posted: the call returns at once and the transfer proceeds while the
  // caller computes (pipeline stages overlap this way). The buffer must stay untouched
  // until Wait.
  virtual absl::StatusOr<std::unique_ptr<Pending>> PostSend(std::span<const std::byte> data,
                                                            int peer, uint32_t tag) = 0;
  virtual absl::StatusOr<std::unique_ptr<Pending>> PostRecv(std::span<std::byte> data, int peer,
                                                            uint32_t tag) = 0;
  virtual absl::Status Barrier() = 0;
};

// Spans of any trivially copyable element as bytes.
template <typename T>
std::span<const std::byte> AsBytes(std::span<T> s) {
  return std::as_bytes(s);
}
template <typename T>
std::span<std::byte> AsWritableBytes(std::span<T> s) {
  return std::as_writable_bytes(s);
}

}  // namespace baton::parallel
