// One client request as the router runs it: `n` sequences on a worker, each streamed
// back as token ids that the router turns into text (incremental detokenization, stop
// strings). A stop string ends its sequence in the router, which then cancels it in
// the worker; EOS, stop ids and max_tokens end it in the worker.
//
//   BATON_ASSIGN_OR_RETURN(auto gen, Generation::Start(&worker, tokenizer, request));
//   ChoiceDelta d;
//   while (gen->Next(&d)) Send(d);          // deltas of all choices, interleaved
//   if (!gen->status().ok()) ...             // the first failure ends every choice
//
// Cancel() (any thread) stops every sequence in the worker at once; the destructor does
// too, so a handler that returns early leaves nothing running.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "baton/internal/v1/worker.grpc.pb.h"
#include "router/worker_client.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/stop_strings.h"
#include "tokenizer/tokenizer.h"

namespace baton::router {

struct GenerationRequest {
  std::string request_id;  // choice i runs in the worker as "<request_id>-<i>"
  std::vector<int32_t> prompt_ids;
  // Everything the worker applies: sampling, max_tokens, stop ids, EOS, logprobs. Stop
  // strings are the router's (below); params.stop must be empty.
  baton::internal::v1::SamplingParams params;
  std::vector<std::string> stop;
  bool include_stop_str_in_output = false;
  bool skip_special_tokens = true;
  int n = 1;  // choice i > 0 with a seed uses seed + i, so the choices differ
  int priority = 0;
  std::string cache_salt;
  std::optional<std::chrono::system_clock::time_point> deadline;
};

struct TopLogprob {
  int32_t token_id = 0;
  std::string token;  // the token's bytes (may be part of a UTF-8 character)
  float logprob = 0;
};

struct TokenLogprob {
  int32_t token_id = 0;
  std::string token;
  float logprob = 0;
  std::vector<TopLogprob> top;
};

struct ChoiceDelta {
  int index = 0;
  std::vector<int32_t> token_ids;
  std::string text;  // final text: never a broken UTF-8 sequence or a stop string
  std::vector<TokenLogprob> logprobs;
  bool finished = false;
  // On the final delta of a choice:
  std::string finish_reason;             // "stop" or "length"
  std::string stop_reason;               // the stop string, or the stop token id; empty for EOS
  std::optional<int32_t> stop_token_id;  // set when a stop id (not a string) ended it
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;
  int64_t completion_tokens = 0;
  double queue_seconds = 0;                // worker: arrival to first scheduled
  double time_to_first_token_seconds = 0;  // worker: arrival to first token
  int num_preemptions = 0;
};

class Generation {
 public:
  static absl::StatusOr<std::unique_ptr<Generation>> Start(
      WorkerClient* worker, std::shared_ptr<const tokenizer::Tokenizer> tokenizer,
      GenerationRequest request);
  ~Generation();
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  // Blocks for the next delta of any choice. False once every choice has finished, or
  // when one failed (status() says why; the others are cancelled).
  bool Next(ChoiceDelta* out);
  absl::Status status() const { return status_; }
  // Thread-safe: cancels every sequence in the worker; Next then returns false with
  // Cancelled (unless everything had finished).
  void Cancel();

 private:
  struct Choice;
  Generation(WorkerClient* worker, std::shared_ptr<const tokenizer::Tokenizer> tokenizer,
             GenerationRequest request);
  // Turns one worker message into a delta; false when it carries nothing to send.
  bool Process(Choice& c, const baton::internal::v1::GenerateResponse& msg, ChoiceDelta* out);
  void Fail(absl::Status status);
  void CancelAll();
  bool WasCancelled();
  void Drain();

  WorkerClient* worker_;
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer_;
  GenerationRequest request_;
  grpc::CompletionQueue cq_;
  std::vector<std::unique_ptr<Choice>> choices_;
  int pending_ops_ = 0;  // operations started on cq_ and not yet returned
  int open_choices_ = 0;
  absl::Status status_;
  std::mutex cancel_mu_;  // Cancel() may race the destructor's cancel
  bool cancelled_ = false;
};

}  // namespace baton::router
