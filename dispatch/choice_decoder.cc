#include "dispatch/choice_decoder.h"

#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "common/strings.h"

namespace baton::dispatch {

namespace pb = ::baton::internal::v1;

ChoiceDecoder::ChoiceDecoder(int index, std::shared_ptr<const tokenizer::Tokenizer> tokenizer,
                             const GenerationRequest& request)
    : index_(index),
      tokenizer_(tokenizer),
      request_prompt_tokens_(static_cast<int64_t>(request.prompt_ids.size())),
      text_(std::move(tokenizer), request.stop, request.include_stop_str_in_output,
            tokenizer::DecodeOptions{request.skip_special_tokens}) {}

absl::StatusOr<bool> ChoiceDecoder::Process(const pb::GenerateResponse& msg, ChoiceDelta* out) {
  *out = ChoiceDelta();
  out->index = index_;
  if (ended_) return false;
  // From the first message that has them (the sequence's first stream, should it have been
  // migrated to another worker), so a sequence the router stops itself keeps them too.
  if (msg.has_usage() && msg.usage().prompt_tokens() > 0 && prompt_tokens_ == 0) {
    prompt_tokens_ = msg.usage().prompt_tokens();
    cached_tokens_ = msg.usage().cached_tokens();
    queue_seconds_ = msg.timings().queue_seconds();
    time_to_first_token_seconds_ = msg.timings().time_to_first_token_seconds();
  }
  // The worker applies no stop strings, so a final "stop" message ends on the token that
  // stopped it (EOS or a stop id), which is never text.
  const bool ends_on_stop_token = msg.finished() && msg.finish_reason() == "stop";
  const int count = msg.token_ids_size();
  for (int k = 0; k < count && !ended_; ++k) {
    const int32_t id = msg.token_ids(k);
    ++generated_;
    out->token_ids.push_back(id);
    if (k < msg.logprobs_size()) {
      const pb::TokenLogprob& in = msg.logprobs(k);
      TokenLogprob lp;
      lp.token_id = in.token_id();
      lp.logprob = in.logprob();
      if (tokenizer_->IsValid(lp.token_id)) lp.token = tokenizer_->TokenBytes(lp.token_id);
      for (const pb::TopLogprob& t : in.top()) {
        TopLogprob top{t.token_id(), "", t.logprob()};
        if (tokenizer_->IsValid(top.token_id)) top.token = tokenizer_->TokenBytes(top.token_id);
        lp.top.push_back(std::move(top));
      }
      out->logprobs.push_back(std::move(lp));
    }
    if (ends_on_stop_token && k == count - 1) break;
    absl::StatusOr<tokenizer::TextStream::Piece> piece = text_.Add(id);
    if (!piece.ok()) {
      ended_ = true;
      return absl::InternalError(StrCat("the worker sent ", piece.status().message(),
                                        "; do the router and the worker serve the same model?"));
    }
    out->text += piece->text;
    if (piece->stopped) {
      ended_ = true;
      stopped_by_string_ = true;
      out->finish_reason = "stop";
      out->stop_reason = std::move(piece->matched);
    }
  }
  if (!ended_ && msg.finished()) {
    ended_ = true;
    out->finish_reason = msg.finish_reason();
    out->stop_reason = msg.stop_reason();
    int32_t stop_id = 0;
    // The worker applies no stop strings: its stop reason is always a token id.
    if (!msg.stop_reason().empty() && absl::SimpleAtoi(msg.stop_reason(), &stop_id)) {
      out->stop_token_id = stop_id;
    }
    tokenizer::TextStream::Piece tail = text_.Finish();
    out->text += tail.text;
    if (tail.stopped) {
      out->finish_reason = "stop";
      out->stop_reason = std::move(tail.matched);
    }
    out->num_preemptions = msg.timings().num_preemptions();
  }
  if (ended_) {
    out->finished = true;
    out->prompt_tokens = prompt_tokens_ > 0 ? prompt_tokens_ : request_prompt_tokens_;
    out->cached_tokens = cached_tokens_;
    out->completion_tokens = generated_;
    out->queue_seconds = queue_seconds_;
    out->time_to_first_token_seconds = time_to_first_token_seconds_;
  }
  return !out->token_ids.empty() || !out->text.empty() || out->finished;
}

}  // namespace baton::dispatch
