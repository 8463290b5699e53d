// The vocabulary and the encode/decode pipeline description that both loaders
// (tokenizer.json and GGUF) produce. Plain data: the Tokenizer interprets it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/strings/string_view.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"

namespace baton::tokenizer {

using TokenId = int32_t;

// Token types as GGUF numbers them (tokenizer.ggml.token_type).
enum class TokenType : uint8_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

enum class ModelKind {
  // GPT-2 style: text is split into pieces, each piece's bytes map to 256 base symbols.
  kByteLevelBpe,
  // SentencePiece style: base symbols are UTF-8 characters; unknown ones fall back to
  // <0xNN> byte tokens (or <unk>).
  kSentencePieceBpe,
};

// A token matched in the raw text before any normalization: never split by BPE.
struct AddedToken {
  TokenId id = -1;
  std::string content;
  bool special = false;  // matched only when parse_special is on; skipped on decode
  bool lstrip = false;   // absorbs whitespace on its left
  bool rstrip = false;   // absorbs whitespace on its right
  bool single_word = false;
};

struct MergeInfo {
  int32_t rank = 0;  // lower merges first
  TokenId result = -1;
};

struct DecoderSpec {
  // Byte-level tokens map each character back through the GPT-2 byte table.
  bool byte_level = false;
  // "<0xNN>" tokens decode to the byte NN.
  bool byte_fallback = false;
  // Literal replacements applied to each token's text, in order (e.g. "▁" -> " ").
  std::vector<std::pair<std::string, std::string>> replacements;
  // Leading spaces removed from the start of the decoded text (SentencePiece's dummy
  // prefix): at most this many.
  int strip_leading_spaces = 0;
};

// Lookup by std::string_view without building a std::string (this Abseil's own
// string_view is not std::string_view, so its default hasher cannot do it).
struct TextHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const {
    return absl::Hash<absl::string_view>{}(absl::string_view(s.data(), s.size()));
  }
};
struct TextEq {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const { return a == b; }
};
using TextMap = absl::flat_hash_map<std::string, TokenId, TextHash, TextEq>;

struct Vocab {
  ModelKind kind = ModelKind::kByteLevelBpe;
  std::vector<std::string> tokens;  // id -> the model's token text
  std::vector<TokenType> types;     // id -> type
  TextMap token_to_id;
  // (left id << 32 | right id) -> the merge of that pair.
  absl::flat_hash_map<uint64_t, MergeInfo> merges;
  bool byte_fallback = false;
  bool ignore_merges = false;  // a piece that is itself a token is not merged further
  TokenId unk_id = -1;
  TokenId bos_id = -1;
  TokenId eos_id = -1;
  bool add_bos = false;
  bool add_eos = false;
  std::vector<AddedToken> added_tokens;
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  DecoderSpec decoder;
  std::string source;  // where it came from, for messages

  static uint64_t PairKey(TokenId left, TokenId right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
};

}  // namespace baton::tokenizer
