#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cstdio>

#include "common/status.h"
#include "common/strings.h"
#include "common/utf8.h"
#include "tokenizer/byte_level.h"

namespace baton::tokenizer {
namespace {

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

bool IsWordByte(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u >= 0x80 || (u >= '0' && u <= '9') || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') ||
         u == '_';
}

// "<0x41>" -> 0x41; -1 if `token` is not a byte token.
int ParseByteToken(std::string_view token) {
  if (token.size() != 6 || token.substr(0, 3) != "<0x" || token[5] != '>') return -1;
  unsigned value = 0;
  for (char c : token.substr(3, 2)) {
    value <<= 4;
    if (c >= '0' && c <= '9') {
      value |= static_cast<unsigned>(c - '0');
    } else if (c >= 'A' && c <= 'F') {
      value |= static_cast<unsigned>(c - 'A' + 10);
    } else if (c >= 'a' && c <= 'f') {
      value |= static_cast<unsigned>(c - 'a' + 10);
    } else {
      return -1;
    }
  }
  return static_cast<int>(value);
}

std::string DecodeTokenText(const DecoderSpec& d, const std::string& token) {
  if (d.byte_fallback) {
    const int byte = ParseByteToken(token);
    if (byte >= 0) return std::string(1, static_cast<char>(byte));
  }
  std::string text = token;
  for (const auto& [from, to] : d.replacements) text = baton::ReplaceAll(text, from, to);
  if (d.byte_level) {
    std::string bytes;
    // A token outside the byte alphabet (an added token) decodes to its own UTF-8.
    if (UnicodeToBytes(text, &bytes)) return bytes;
  }
  return text;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const Tokenizer>> Tokenizer::Create(Vocab vocab,
                                                                   TokenizerLimits limits) {
  const auto n = static_cast<int64_t>(vocab.tokens.size());
  if (n == 0) return absl::InvalidArgumentError(baton::StrCat(vocab.source, ": empty vocabulary"));
  if (vocab.types.size() != vocab.tokens.size()) {
    return absl::InvalidArgumentError(
        baton::StrCat(vocab.source, ": ", vocab.types.size(), " token types for ", n, " tokens"));
  }
  auto check_id = [&](TokenId id, std::string_view what) -> absl::Status {
    if (id < -1 || id >= n) {
      return absl::InvalidArgumentError(
          baton::StrCat(vocab.source, ": ", what, " id ", id, " is outside the vocabulary of ", n));
    }
    return absl::OkStatus();
  };
  BATON_RETURN_IF_ERROR(check_id(vocab.bos_id, "BOS"));
  BATON_RETURN_IF_ERROR(check_id(vocab.eos_id, "EOS"));
  BATON_RETURN_IF_ERROR(check_id(vocab.unk_id, "unknown-token"));
  for (const AddedToken& t : vocab.added_tokens) {
    BATON_RETURN_IF_ERROR(check_id(t.id, baton::StrCat("added token '", t.content, "'")));
    if (t.id < 0 || t.content.empty()) {
      return absl::InvalidArgumentError(
          baton::StrCat(vocab.source, ": added token with id ", t.id, " has no content"));
    }
  }
  if (vocab.add_bos && vocab.bos_id < 0) {
    return absl::InvalidArgumentError(
        baton::StrCat(vocab.source, ": add_bos_token is set but the BOS token is unknown"));
  }
  if (vocab.add_eos && vocab.eos_id < 0) {
    return absl::InvalidArgumentError(
        baton::StrCat(vocab.source, ": add_eos_token is set but the EOS token is unknown"));
  }
  return std::shared_ptr<const Tokenizer>(new Tokenizer(std::move(vocab), limits));
}

Tokenizer::Tokenizer(Vocab vocab, TokenizerLimits limits)
    : vocab_(std::move(vocab)), limits_(limits), bpe_(&vocab_) {
  const size_t n = vocab_.tokens.size();
  token_bytes_.resize(n);
  is_special_.assign(n, false);
  for (size_t i = 0; i < n; ++i) {
    token_bytes_[i] = DecodeTokenText(vocab_.decoder, vocab_.tokens[i]);
    is_special_[i] = vocab_.types[i] == TokenType::kControl;
  }
  added_by_first_byte_.resize(256);
  for (const AddedToken& t : vocab_.added_tokens) {
    is_special_[t.id] = is_special_[t.id] || t.special;
    added_by_first_byte_[static_cast<uint8_t>(t.content[0])].push_back(&t);
  }
  for (auto& bucket : added_by_first_byte_) {
    std::stable_sort(bucket.begin(), bucket.end(), [](const AddedToken* a, const AddedToken* b) {
      return a->content.size() > b->content.size();
    });
  }
}

TokenId Tokenizer::TokenToId(std::string_view token) const {
  auto it = vocab_.token_to_id.find(token);
  if (it != vocab_.token_to_id.end()) return it->second;
  for (const AddedToken& t : vocab_.added_tokens) {
    if (t.content == token) return t.id;
  }
  return -1;
}

bool Tokenizer::FindSpecialText(std::string_view text, size_t from, TextRange* found) const {
  for (size_t pos = from; pos < text.size(); ++pos) {
    for (const AddedToken* t : added_by_first_byte_[static_cast<uint8_t>(text[pos])]) {
      if (!t->special || text.compare(pos, t->content.size(), t->content) != 0) continue;
      *found = {pos, pos + t->content.size()};
      return true;
    }
  }
  return false;
}

bool Tokenizer::FindAddedToken(std::string_view text, size_t from, const EncodeOptions& options,
                               size_t* begin, size_t* end, TokenId* id) const {
  std::span<const TextRange> literal = options.literal;
  for (size_t pos = from; pos < text.size(); ++pos) {
    while (!literal.empty() && literal.front().end <= pos) literal = literal.subspan(1);
    const auto& bucket = added_by_first_byte_[static_cast<uint8_t>(text[pos])];
    for (const AddedToken* t : bucket) {
      if (t->special) {
        // A special token is not matched where any of its bytes are literal text.
        if (!options.parse_special) continue;
        if (!literal.empty() && literal.front().begin < pos + t->content.size()) continue;
      }
      if (text.compare(pos, t->content.size(), t->content) != 0) continue;
      size_t b = pos;
      size_t e = pos + t->content.size();
      if (t->single_word &&
          ((b > 0 && IsWordByte(text[b - 1])) || (e < text.size() && IsWordByte(text[e])))) {
        continue;
      }
      if (t->lstrip) {
        while (b > from && IsSpace(text[b - 1])) --b;
      }
      if (t->rstrip) {
        while (e < text.size() && IsSpace(text[e])) ++e;
      }
      *begin = b;
      *end = e;
      *id = t->id;
      return true;
    }
  }
  return false;
}

void Tokenizer::EncodeSegment(std::string_view text, bool first_segment,
                              std::vector<TokenId>* out) const {
  if (text.empty()) return;
  std::string normalized;
  if (!vocab_.normalizer.empty()) {
    normalized = vocab_.normalizer.Apply(text);
    text = normalized;
  }
  if (vocab_.pre_tokenizer.empty()) {
    bpe_.EncodePiece(text, out);
    return;
  }
  thread_local PieceBuffer buffer;
  buffer.Clear();
  vocab_.pre_tokenizer.Run(text, first_segment, &buffer);
  for (std::string_view piece : buffer.pieces) bpe_.EncodePiece(piece, out);
}

absl::StatusOr<std::vector<TokenId>> Tokenizer::Encode(std::string_view text,
                                                       const EncodeOptions& options) const {
  if (text.size() > limits_.max_input_bytes) {
    return absl::InvalidArgumentError(baton::StrCat("text to encode is ", text.size(),
                                                    " bytes; the limit (max_input_bytes) is ",
                                                    limits_.max_input_bytes, " bytes"));
  }
  std::string sanitized;
  if (!IsValidUtf8(text)) {
    if (!options.literal.empty()) {
      // Sanitizing would move the ranges; the callers that give them encode JSON strings,
      // which are valid UTF-8.
      return absl::InvalidArgumentError("text with literal ranges must be valid UTF-8");
    }
    sanitized = SanitizeUtf8(text);
    text = sanitized;
  }
  std::vector<TokenId> out;
  out.reserve(text.size() / 3 + 2);
  if (options.add_special_tokens && vocab_.add_bos) out.push_back(vocab_.bos_id);
  size_t pos = 0;
  size_t begin = 0;
  size_t end = 0;
  TokenId id = -1;
  while (FindAddedToken(text, pos, options, &begin, &end, &id)) {
    EncodeSegment(text.substr(pos, begin - pos), pos == 0, &out);
    out.push_back(id);
    pos = end;
  }
  EncodeSegment(text.substr(pos), pos == 0, &out);
  if (options.add_special_tokens && vocab_.add_eos) out.push_back(vocab_.eos_id);
  return out;
}

absl::StatusOr<std::string> Tokenizer::Decode(std::span<const TokenId> ids,
                                              const DecodeOptions& options) const {
  std::string bytes;
  for (TokenId id : ids) {
    if (!IsValid(id)) {
      return absl::InvalidArgumentError(
          baton::StrCat("token id ", id, " is outside the vocabulary (size ", vocab_size(), ")"));
    }
    if (options.skip_special_tokens && is_special_[id]) continue;
    bytes += token_bytes_[id];
  }
  size_t strip = 0;
  while (strip < bytes.size() && static_cast<int>(strip) < vocab_.decoder.strip_leading_spaces &&
         bytes[strip] == ' ') {
    ++strip;
  }
  return SanitizeUtf8(std::string_view(bytes).substr(strip));
}

}  // namespace baton::tokenizer
