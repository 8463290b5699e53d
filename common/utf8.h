// UTF-8 helpers. Invalid input is never dropped silently: every maximal invalid
// subpart becomes one U+FFFD, the rule that Python's errors="replace", Rust's
// from_utf8_lossy and the WHATWG decoder share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace baton {

inline constexpr char32_t kReplacementChar = 0xFFFD;
inline constexpr std::string_view kReplacementUtf8 = "\xEF\xBF\xBD";

// Appends the UTF-8 encoding of `cp` (which must be a scalar value) to `out`.
void AppendUtf8(char32_t cp, std::string* out);

// Decodes one code point at s[*pos]. On success stores it in *cp, advances *pos past it
// and returns true. On an invalid or truncated sequence advances *pos past its maximal
// subpart (at least one byte) and returns false.
bool DecodeUtf8(std::string_view s, size_t* pos, char32_t* cp);

// Length of the sequence that `lead` starts: 1-4, or 0 for a byte that cannot lead.
int Utf8SequenceLength(uint8_t lead);

bool IsValidUtf8(std::string_view s);

// Returns `s` with each maximal invalid subpart replaced by U+FFFD.
std::string SanitizeUtf8(std::string_view s);

// Streaming form of SanitizeUtf8. Appends to *out the sanitized text of the longest
// prefix of `bytes` that can no longer change with more input, and returns how many
// bytes it consumed. An incomplete sequence at the end stays unconsumed unless `final`.
// Concatenating the outputs of successive calls equals SanitizeUtf8 of all bytes.
size_t AppendSanitizedUtf8Prefix(std::string_view bytes, bool final, std::string* out);

}  // namespace baton
