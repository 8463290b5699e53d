// The seam between the load generator and a protocol. A client runs every request on one
// event loop thread, as vLLM's `bench serve` runs its clients on one asyncio loop, so
// that the load generator adds no tail of its own: no thread per request and no hand-off
// between threads per streamed chunk. Tests drive the load generator with fakes of this
// interface and drive the real clients against fake servers.
//
//   std::thread loop([&] { client.Run(); });
//   client.Post([&] {
//     client.Start(prompt, [&](RequestResult r) { ...; client.Stop(); });
//   });
//   loop.join();
#pragma once

#include <functional>
#include <string>

#include "tools/bench_serve_dataset.h"
#include "tools/bench_serve_result.h"

namespace baton::tools {

// What every request carries, whatever the protocol.
struct RequestOptions {
  std::string model;    // empty: the server's default model
  std::string api_key;  // sent as "authorization: Bearer <key>" when not empty
  double temperature = 0.0;
  bool ignore_eos = true;
  // Completions and gRPC: send the prompt's token ids instead of its text when the
  // dataset has them (exact prompt lengths). Chat always sends text.
  bool send_token_ids = true;
  double timeout_s = 600;  // whole request, from send to the last byte
};

class BenchClient {
 public:
  using Done = std::function<void(RequestResult)>;

  virtual ~BenchClient() = default;

  // On the loop thread: sends one prompt and calls `done` once, on the loop thread, when
  // its whole streamed response has arrived or the request failed. Never throws: failures
  // are results with success = false and the reason in `error`. Leaves start_s and end_s
  // to the caller. `prompt` must outlive the request.
  virtual void Start(const BenchPrompt& prompt, Done done) = 0;
  // From any thread: runs `fn` on the loop thread.
  virtual void Post(std::function<void()> fn) = 0;
  // Runs the loop on the calling thread until Stop(). Run may be called again after it
  // returns.
  virtual void Run() = 0;
  // On the loop thread, with no request in flight: Run returns after the current handler.
  virtual void Stop() = 0;

  // One request on the calling thread, which runs the loop until it ends (the test
  // request before a benchmark, and tests). No other thread may be running the loop.
  RequestResult Send(const BenchPrompt& prompt);
};

}  // namespace baton::tools
