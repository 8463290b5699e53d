// A stand-in for a worker (baton.internal.v1.Worker) that generates no tokens, only
// emits them: each Generate streams max_tokens events of one token id each, as fast as
// gRPC takes them or one every `interval`, and records the steady-clock time at which it
// wrote each event. frontdoor_bench puts the router in front of it, so that whatever time
// passes between that write and a client's read is the front door's, not an engine's.
//
//   BATON_ASSIGN_OR_RETURN(auto stub, StubWorker::Start({264, 285}, 4096, 1280));
//   stub->set_interval(std::chrono::milliseconds(2));
//   ... requests with request_id "r1" ...
//   BATON_RETURN_IF_ERROR(stub->WaitForRequests(1, absl::Seconds(10)));
//   auto writes = stub->TakeAll();  // writes["r1"][i]: when event i was written
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"

namespace baton::bench {

using Clock = std::chrono::steady_clock;

class StubWorker {
 public:
  // `token_ids` are cycled through: event i carries token_ids[i % size].
  static absl::StatusOr<std::unique_ptr<StubWorker>> Start(std::vector<int32_t> token_ids,
                                                           int64_t max_model_len,
                                                           int32_t vocab_size);
  ~StubWorker();

  int port() const { return port_; }
  std::string address() const;

  // Zero: each event is written as soon as the previous write returned (the ceiling).
  // Applies to calls that start afterwards.
  void set_interval(std::chrono::microseconds interval) { interval_us_.store(interval.count()); }
  // True: events fall on the ticks of one clock shared by all calls (every stream's token
  // at once); false: each call keeps its own clock from when it started.
  void set_aligned(bool aligned) { aligned_.store(aligned); }

  // Blocks until `count` Generate calls have ended since the last TakeAll, so that their
  // write times are all recorded (a client may read the last event before the call ends).
  absl::Status WaitForRequests(int64_t count, absl::Duration timeout);
  // The write times of each request ended since the last call, by request id; forgets them.
  std::unordered_map<std::string, std::vector<Clock::time_point>> TakeAll();

  void Shutdown();

 private:
  class Service;
  StubWorker() = default;
  void Record(const std::string& request_id, std::vector<Clock::time_point> writes);

  std::vector<int32_t> token_ids_;
  std::atomic<int64_t> interval_us_{0};
  std::atomic<bool> aligned_{false};
  const Clock::time_point epoch_ = Clock::now();
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;

  std::mutex mu_;
  std::condition_variable ended_;
  // Guarded by mu_.
  std::unordered_map<std::string, std::vector<Clock::time_point>> writes_;
  int64_t ended_calls_ = 0;
};

}  // namespace baton::bench
