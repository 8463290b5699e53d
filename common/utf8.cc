#include "common/utf8.h"

#include <cstring>

namespace baton {

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

int Utf8SequenceLength(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

namespace {

// Bounds of the second byte of a sequence, which exclude overlongs and surrogates.
void SecondByteRange(uint8_t lead, uint8_t* lo, uint8_t* hi) {
  *lo = 0x80;
  *hi = 0xBF;
  if (lead == 0xE0) *lo = 0xA0;
  if (lead == 0xED) *hi = 0x9F;
  if (lead == 0xF0) *lo = 0x90;
  if (lead == 0xF4) *hi = 0x8F;
}

// Result of looking at one sequence: kValid, kInvalid (consume `len` bytes as one
// replacement), or kIncomplete (valid so far but the input ends).
enum class Seq { kValid, kInvalid, kIncomplete };

Seq Examine(std::string_view s, size_t pos, size_t* len, char32_t* cp) {
  const auto lead = static_cast<uint8_t>(s[pos]);
  const int n = Utf8SequenceLength(lead);
  if (n == 0) {
    *len = 1;
    return Seq::kInvalid;
  }
  if (n == 1) {
    *len = 1;
    *cp = lead;
    return Seq::kValid;
  }
  char32_t value = lead & (0xFF >> (n + 1));
  for (int i = 1; i < n; ++i) {
    if (pos + i >= s.size()) {
      *len = static_cast<size_t>(i);
      return Seq::kIncomplete;
    }
    const auto b = static_cast<uint8_t>(s[pos + i]);
    uint8_t lo = 0x80;
    uint8_t hi = 0xBF;
    if (i == 1) SecondByteRange(lead, &lo, &hi);
    if (b < lo || b > hi) {
      *len = static_cast<size_t>(i);
      return Seq::kInvalid;
    }
    value = (value << 6) | (b & 0x3F);
  }
  *len = static_cast<size_t>(n);
  *cp = value;
  return Seq::kValid;
}

}  // namespace

bool DecodeUtf8(std::string_view s, size_t* pos, char32_t* cp) {
  size_t len = 0;
  const Seq r = Examine(s, *pos, &len, cp);
  *pos += len;
  return r == Seq::kValid;
}

bool IsValidUtf8(std::string_view s) {
  size_t pos = 0;
  char32_t cp = 0;
  while (pos < s.size()) {
    // Plain ASCII, eight bytes at a time: most text is mostly ASCII.
    if (pos + 8 <= s.size()) {
      uint64_t word = 0;
      std::memcpy(&word, s.data() + pos, sizeof(word));
      if ((word & 0x8080808080808080ULL) == 0) {
        pos += 8;
        continue;
      }
    }
    if (static_cast<uint8_t>(s[pos]) < 0x80) {
      ++pos;
      continue;
    }
    if (!DecodeUtf8(s, &pos, &cp)) return false;
  }
  return true;
}

size_t AppendSanitizedUtf8Prefix(std::string_view bytes, bool final, std::string* out) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    // ASCII fast path.
    if (static_cast<uint8_t>(bytes[pos]) < 0x80) {
      out->push_back(bytes[pos++]);
      continue;
    }
    size_t len = 0;
    char32_t cp = 0;
    switch (Examine(bytes, pos, &len, &cp)) {
      case Seq::kValid:
        out->append(bytes.substr(pos, len));
        break;
      case Seq::kInvalid:
        out->append(kReplacementUtf8);
        break;
      case Seq::kIncomplete:
        if (!final) return pos;
        out->append(kReplacementUtf8);
        break;
    }
    pos += len;
  }
  return pos;
}

std::string SanitizeUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  AppendSanitizedUtf8Prefix(s, /*final=*/true, &out);
  return out;
}

}  // namespace baton
