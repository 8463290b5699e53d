// frontdoor_bench's clients with every stream of a phase on one thread: one completion
// queue for the gRPC paths (direct and the router's), one asio loop for HTTP SSE. This is
// how vLLM's `bench serve` runs its clients (one asyncio loop), and it makes the client
// cost the same on every path: one wake-up per read, no hand-off between client threads.
// The clients that block a thread per stream (frontdoor_clients.h) hand each gRPC read
// from whichever thread polled to the stream's own, which adds a tail of their own to the
// direct baseline (docs/perf/frontdoor.md, "The clients' own tail").
//
//   BATON_ASSIGN_OR_RETURN(auto loop, LoopClients::Create(Path::kGrpc, port, 64, &expected));
//   std::thread t([&] { loop->Run(); });
//   loop->Post([&] {
//     loop->Start(0, "r1", 128, &received, [&](absl::Status s) { ...; loop->Stop(); });
//   });
//   t.join();
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/frontdoor_clients.h"
#include "bench/frontdoor_wire.h"

namespace baton::bench {

class LoopClients {
 public:
  using Done = std::function<void(absl::Status)>;

  // `streams` connections to `port` (the router's HTTP or gRPC port, or the stub's for
  // Path::kDirect), one per stream, as separate users would have. `expected` must outlive
  // the clients.
  static absl::StatusOr<std::unique_ptr<LoopClients>> Create(Path path, int port, int streams,
                                                             const ExpectedStream* expected);
  virtual ~LoopClients() = default;

  // On the loop thread, for a stream with no request in flight: sends one request of
  // `tokens` events, appends the time each content event was read to *received, and calls
  // `done` on the loop thread with the outcome (an event lost, out of order, malformed or
  // extra is an error). *received must stay put until then.
  virtual void Start(int stream, const std::string& request_id, int tokens,
                     std::vector<Clock::time_point>* received, Done done) = 0;
  // Runs `fn` on the loop thread; from any thread.
  virtual void Post(std::function<void()> fn) = 0;
  // Runs the loop on the calling thread until Stop().
  virtual void Run() = 0;
  // On the loop thread, with no request in flight: Run returns after the current handler.
  virtual void Stop() = 0;
};

}  // namespace baton::bench
