#include "tokenizer/text_stream.h"

#include <utility>

#include "common/strings.h"

namespace baton::tokenizer {

TextStream::TextStream(std::shared_ptr<const Tokenizer> tokenizer, std::vector<std::string> stops,
                       bool include_stop_in_output, DecodeOptions decode)
    : tokenizer_(tokenizer),
      detok_(std::move(tokenizer), decode),
      stops_(std::move(stops), include_stop_in_output) {}

absl::StatusOr<TextStream::Piece> TextStream::Add(TokenId id) {
  if (stops_.stopped()) return Piece{};
  if (!tokenizer_->IsValid(id)) {
    return absl::OutOfRangeError(StrCat(
        "token id ", id, " is outside the tokenizer's vocabulary of ", tokenizer_->vocab_size()));
  }
  absl::StatusOr<std::string> delta = detok_.Add(id);
  if (!delta.ok()) return delta.status();
  StopStringMatcher::Result r = stops_.Add(*delta);
  return Piece{std::move(r.emit), r.stopped, std::move(r.matched)};
}

TextStream::Piece TextStream::Finish() {
  if (stops_.stopped()) return Piece{};
  StopStringMatcher::Result tail = stops_.Add(detok_.Finish());
  Piece out{std::move(tail.emit), tail.stopped, std::move(tail.matched)};
  if (!out.stopped) out.text += stops_.Flush();
  return out;
}

}  // namespace baton::tokenizer
