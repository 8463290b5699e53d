// The seam between the load generator and a protocol: a client sends one prompt and
// reports what it measured. Tests drive the load generator with fakes of this interface
// and drive the real clients against fake servers.
#pragma once

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
  virtual ~BenchClient() = default;

  // Sends one prompt and waits for its whole streamed response. Thread-safe, and never
  // throws: failures are results with success = false and the reason in `error`.
  // Leaves start_s and end_s to the caller.
  virtual RequestResult Send(const BenchPrompt& prompt) = 0;
};

}  // namespace baton::tools
