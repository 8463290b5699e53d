#include "tokenizer/detokenizer.h"

#include "common/strings.h"
#include "common/utf8.h"

namespace baton::tokenizer {

IncrementalDetokenizer::IncrementalDetokenizer(std::shared_ptr<const Tokenizer> tokenizer,
                                               DecodeOptions options)
    : tokenizer_(std::move(tokenizer)),
      options_(options),
      spaces_to_strip_(tokenizer_->strip_leading_spaces()) {}

absl::StatusOr<std::string> IncrementalDetokenizer::Add(TokenId id) {
  if (!tokenizer_->IsValid(id)) {
    return absl::InvalidArgumentError(baton::StrCat(
        "token id ", id, " is outside the vocabulary (size ", tokenizer_->vocab_size(), ")"));
  }
  if (options_.skip_special_tokens && tokenizer_->IsSpecial(id)) return std::string();
  std::string_view bytes = tokenizer_->TokenBytes(id);
  // The decoder's leading-space strip applies to the start of the whole text only.
  while (at_start_ && !bytes.empty()) {
    if (spaces_to_strip_ > 0 && bytes[0] == ' ') {
      bytes.remove_prefix(1);
      --spaces_to_strip_;
    } else {
      at_start_ = false;
    }
  }
  pending_.append(bytes);
  std::string out;
  const size_t consumed = AppendSanitizedUtf8Prefix(pending_, /*final=*/false, &out);
  pending_.erase(0, consumed);
  return out;
}

std::string IncrementalDetokenizer::Finish() {
  std::string out;
  AppendSanitizedUtf8Prefix(pending_, /*final=*/true, &out);
  pending_.clear();
  return out;
}

}  // namespace baton::tokenizer
