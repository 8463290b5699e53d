// Encode arbitrary bytes with a byte-level and a SentencePiece-style tokenizer. Oracles:
// nothing crashes, every id is in the vocabulary, and for the byte-level tokenizer
// (no normalizer) decoding with special tokens kept gives back the sanitized input,
// except around tokens that strip whitespace.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "common/utf8.h"
#include "tests/fuzz/synthetic_vocab.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace baton::tokenizer;  // NOLINT(google-build-using-namespace)
  static const auto byte_level = synthetic::ByteLevel();
  static const auto spm = synthetic::SentencePiece();
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const EncodeOptions options{.add_special_tokens = (flags & 1) != 0,
                              .parse_special = (flags & 2) != 0};
  const auto& tok = (flags & 4) != 0 ? *spm : *byte_level;
  auto ids = tok.Encode(text, options);
  if (!ids.ok()) std::abort();  // input is far below the size limit
  for (TokenId id : *ids) {
    if (!tok.IsValid(id)) std::abort();
  }
  auto decoded = tok.Decode(*ids, {.skip_special_tokens = false});
  if (!decoded.ok()) std::abort();
  // <tool> absorbs the whitespace around it (lstrip/rstrip), so it cannot round-trip.
  if ((flags & 4) == 0 && !options.add_special_tokens &&
      text.find("<tool>") == std::string_view::npos && *decoded != baton::SanitizeUtf8(text)) {
    std::abort();
  }
  return 0;
}
