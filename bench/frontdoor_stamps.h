// When the stub worker wrote each token event, in memory that frontdoor_bench's client
// process can read although the stub runs in a process of its own. The table lives in a
// memfd that the stub inherits across exec; it also carries what the client process
// decides per phase (the stub's interval, aligned ticks) and how many calls have ended.
//
//   BATON_ASSIGN_OR_RETURN(auto table, StampTable::Create(64, 128));  // client process
//   ... exec the stub with --stamps-fd table->fd() ...
//   BATON_ASSIGN_OR_RETURN(auto table, StampTable::Attach(fd));       // stub process
//   table->Record(StampSlot("p1-s3#3"), writes);  table->EndCall();
//   BATON_RETURN_IF_ERROR(table->WaitForCalls(65, absl::Seconds(10)));  // client process
//   std::vector<Clock::time_point> written = table->Stamps(3);
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace baton::bench {

// steady_clock is CLOCK_MONOTONIC on Linux: one clock for every process on the host.
using Clock = std::chrono::steady_clock;

// The slot a request's stamps go to: the number after the last '#' of its request id, or
// -1 when it has none (warm-up and ceiling requests record nothing).
int64_t StampSlot(std::string_view request_id);

class StampTable {
 public:
  // Room for `slots` requests of up to `tokens` events each.
  static absl::StatusOr<std::unique_ptr<StampTable>> Create(int64_t slots, int64_t tokens);
  // The table behind an inherited descriptor, which it owns from then on (it is closed
  // on failure too); checks that the header fits the size.
  static absl::StatusOr<std::unique_ptr<StampTable>> Attach(int fd);
  ~StampTable();
  StampTable(const StampTable&) = delete;
  StampTable& operator=(const StampTable&) = delete;

  int fd() const { return fd_; }
  int64_t slots() const;
  int64_t tokens() const;

  // Set by the client process between phases, read by the stub as each call starts.
  void set_interval(std::chrono::microseconds interval);
  std::chrono::microseconds interval() const;
  void set_aligned(bool aligned);
  bool aligned() const;

  // Stub side. Record ignores a slot outside the table and events past `tokens`.
  void Record(int64_t slot, const std::vector<Clock::time_point>& writes);
  void EndCall();  // after Record, so that a waiter sees the stamps

  // Client side: forget the last phase's stamps and ended calls.
  void Reset();
  // Until `count` calls have ended since Reset (the last event may be read before the
  // stub's call returns).
  absl::Status WaitForCalls(int64_t count, absl::Duration timeout) const;
  // The stamps recorded in `slot` since Reset; empty when none were.
  std::vector<Clock::time_point> Stamps(int64_t slot) const;

 private:
  struct Header;
  StampTable(int fd, void* base, size_t bytes);
  Header* header() const;
  int64_t* slot_base(int64_t slot) const;  // [count, stamp 0, stamp 1, ...]

  int fd_;
  void* base_;
  size_t bytes_;
};

}  // namespace baton::bench
