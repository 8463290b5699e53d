// Builds a Vocab from a GGUF file's tokenizer.ggml.* metadata: byte-level BPE
// (tokenizer.ggml.model = "gpt2") with the pre-tokenizer that tokenizer.ggml.pre names,
// or SentencePiece-style BPE with scores (tokenizer.ggml.model = "llama").
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/gguf_file.h"
#include "tokenizer/vocab.h"

namespace baton::tokenizer {

absl::StatusOr<Vocab> VocabFromGguf(const gguf::File& file, std::string_view source);

// The regex sequence for a tokenizer.ggml.pre name; NotFound for an unknown name.
absl::StatusOr<std::vector<std::string>> PreTokenizerRegexes(std::string_view pre);

}  // namespace baton::tokenizer
