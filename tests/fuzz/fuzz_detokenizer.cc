// Streams arbitrary ids through the incremental detokenizer. Oracles: every chunk is
// valid UTF-8, and the chunks concatenate to Decode of all the ids at once.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "common/utf8.h"
#include "tests/fuzz/synthetic_vocab.h"
#include "tokenizer/detokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace baton::tokenizer;  // NOLINT(google-build-using-namespace)
  static const auto byte_level = synthetic::ByteLevel();
  static const auto spm = synthetic::SentencePiece();
  if (size < 1) return 0;
  const auto& tok = (data[0] & 1) != 0 ? spm : byte_level;
  const DecodeOptions options{.skip_special_tokens = (data[0] & 2) != 0};
  std::vector<TokenId> ids;
  for (size_t i = 1; i + 1 < size; i += 2) {
    // Ids slightly past the vocabulary exercise the error path too.
    ids.push_back(static_cast<TokenId>((data[i] | (data[i + 1] << 8)) % (tok->vocab_size() + 3)));
  }
  IncrementalDetokenizer detok(tok, options);
  std::string streamed;
  std::vector<TokenId> valid;
  for (TokenId id : ids) {
    auto chunk = detok.Add(id);
    if (!chunk.ok()) {
      if (tok->IsValid(id)) std::abort();
      continue;
    }
    if (!baton::IsValidUtf8(*chunk)) std::abort();
    streamed += *chunk;
    valid.push_back(id);
  }
  const std::string tail = detok.Finish();
  if (!baton::IsValidUtf8(tail)) std::abort();
  streamed += tail;
  auto whole = tok->Decode(valid, options);
  if (!whole.ok() || *whole != streamed) std::abort();
  return 0;
}
