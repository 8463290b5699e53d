// One sequence's worker messages turned into what a client sees: incremental
// detokenization (never a broken UTF-8 sequence), the router's stop strings, logprob
// token bytes, and the usage and timings to report at its end. Both ways of reading a
// worker stream (Generation's legs and GenerateCall, both on the router's completion
// loops) share it.
//
//   ChoiceDecoder d(0, tokenizer, request);
//   ChoiceDelta delta;
//   BATON_ASSIGN_OR_RETURN(bool has_delta, d.Process(msg, &delta));
//   if (d.stopped_by_string()) ...        // cancel the sequence in the worker
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "baton/internal/v1/worker.pb.h"
#include "dispatch/generation_types.h"
#include "tokenizer/text_stream.h"
#include "tokenizer/tokenizer.h"

namespace baton::dispatch {

class ChoiceDecoder {
 public:
  ChoiceDecoder(int index, std::shared_ptr<const tokenizer::Tokenizer> tokenizer,
                const GenerationRequest& request);

  // Fills *out from one worker message; true when it carries something to send. An
  // error (a token id outside the vocabulary) ends the sequence.
  absl::StatusOr<bool> Process(const baton::internal::v1::GenerateResponse& msg, ChoiceDelta* out);

  int index() const { return index_; }
  // The final delta has been produced (by the worker's final message or a stop string).
  bool ended() const { return ended_; }
  // A stop string ended it: the worker does not know yet and must be cancelled.
  bool stopped_by_string() const { return stopped_by_string_; }

 private:
  int index_;
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer_;
  int64_t request_prompt_tokens_;
  tokenizer::TextStream text_;
  bool ended_ = false;
  bool stopped_by_string_ = false;
  int64_t generated_ = 0;
  int64_t prompt_tokens_ = 0;
  int64_t cached_tokens_ = 0;
  double queue_seconds_ = 0;
  double time_to_first_token_seconds_ = 0;
};

}  // namespace baton::dispatch
