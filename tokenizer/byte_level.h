// GPT-2's reversible map between the 256 byte values and printable Unicode characters,
// which byte-level BPE vocabularies are written in.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace baton::tokenizer {

// The UTF-8 text of the character that stands for byte `b`.
const std::string& ByteToUnicode(uint8_t b);

// Maps a token written in the byte-level alphabet back to raw bytes. Returns false if a
// character is outside the alphabet (then *out is unspecified).
bool UnicodeToBytes(std::string_view token, std::string* out);

// Maps raw bytes to the byte-level alphabet.
std::string BytesToUnicode(std::string_view bytes);

}  // namespace baton::tokenizer
