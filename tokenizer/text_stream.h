// One sequence's text as its tokens arrive, written once for every place that turns
// tokens into a client's text (the engine, `baton generate`, the router): incremental
// detokenization (never a broken UTF-8 sequence), stop strings matched across tokens, and
// at the end the tail that was held back.
//
//   TextStream text(tokenizer, params.stop, params.include_stop_str_in_output);
//   BATON_ASSIGN_OR_RETURN(TextStream::Piece p, text.Add(id));
//   Send(p.text);
//   if (p.stopped) ...                    // finish_reason "stop", stop_reason p.matched
//   Send(text.Finish().text);             // at max_tokens or EOS: what was held back
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/stop_strings.h"
#include "tokenizer/tokenizer.h"

namespace baton::tokenizer {

class TextStream {
 public:
  TextStream(std::shared_ptr<const Tokenizer> tokenizer, std::vector<std::string> stops,
             bool include_stop_in_output, DecodeOptions decode = {});

  struct Piece {
    std::string text;      // final text to send
    bool stopped = false;  // a stop string matched: nothing more will come
    std::string matched;   // that stop string
  };

  // The text token `id` makes final. After a stop, nothing. OutOfRange, naming the id and
  // the vocabulary, for an id the tokenizer lacks; the stream is then unchanged.
  absl::StatusOr<Piece> Add(TokenId id);

  // Ends the text: the bytes held back (an unfinished character becomes U+FFFD), in which
  // a stop string may still complete. After a stop, nothing. Call once.
  Piece Finish();

  bool stopped() const { return stops_.stopped(); }

 private:
  std::shared_ptr<const Tokenizer> tokenizer_;
  IncrementalDetokenizer detok_;
  StopStringMatcher stops_;
};

}  // namespace baton::tokenizer
