// What one benchmark request measured, and the clock that measures a streamed response.
// Both clients (HTTP/SSE and gRPC) fill the same RequestResult.
//
//   StreamClock clock(Clock::now());
//   ... clock.OnContent(Clock::now());  // each chunk that carries generated text/tokens
//   clock.Finish(Clock::now(), &result);
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace baton::tools {

using BenchClock = std::chrono::steady_clock;

struct RequestResult {
  bool success = false;
  std::string error;           // why it failed; empty on success
  int64_t prompt_len = 0;      // the dataset's count (tokens, or words without a tokenizer)
  int64_t prompt_tokens = -1;  // the server's count (usage); -1 when it sent none
  int64_t cached_tokens = -1;  // prompt tokens served from the server's prefix cache
  int64_t output_tokens = 0;   // usage, or else the content-bearing chunks (gRPC: token ids)
  double ttft_s = 0;           // send to the first content-bearing chunk
  std::vector<double> itl_s;   // gaps between consecutive content-bearing chunks
  double e2el_s = 0;           // send to the end of the response
  double start_s = 0;          // when it was sent, since the benchmark started
  double end_s = 0;            // when it ended, since the benchmark started
};

// Time per output token after the first: (E2EL - TTFT) / (output_tokens - 1), or 0 when
// there is at most one output token (vLLM's convention).
double Tpot(const RequestResult& r);

class StreamClock {
 public:
  explicit StreamClock(BenchClock::time_point start) : start_(start), last_(start) {}

  void OnContent(BenchClock::time_point t);
  int64_t content_chunks() const { return chunks_; }

  // Sets ttft_s, itl_s and e2el_s. A response without content gets TTFT = E2EL: its
  // first (and only) sign of life was its end.
  void Finish(BenchClock::time_point end, RequestResult* r) const;

 private:
  BenchClock::time_point start_;
  BenchClock::time_point last_;
  double ttft_s_ = -1;
  std::vector<double> itl_s_;
  int64_t chunks_ = 0;
};

}  // namespace baton::tools
