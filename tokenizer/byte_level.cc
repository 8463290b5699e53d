#include "tokenizer/byte_level.h"

#include "common/utf8.h"

namespace baton::tokenizer {
namespace {

struct Tables {
  std::array<std::string, 256> byte_to_text;
  std::array<int16_t, 512> code_to_byte{};  // code points < 512 only, by construction

  Tables() {
    code_to_byte.fill(-1);
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const char32_t cp =
          printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + extra++);
      AppendUtf8(cp, &byte_to_text[b]);
      code_to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const Tables& GetTables() {
  static const Tables tables;
  return tables;
}

}  // namespace

const std::string& ByteToUnicode(uint8_t b) { return GetTables().byte_to_text[b]; }

bool UnicodeToBytes(std::string_view token, std::string* out) {
  const Tables& t = GetTables();
  size_t pos = 0;
  char32_t cp = 0;
  while (pos < token.size()) {
    if (!DecodeUtf8(token, &pos, &cp) || cp >= t.code_to_byte.size() || t.code_to_byte[cp] < 0) {
      return false;
    }
    out->push_back(static_cast<char>(t.code_to_byte[cp]));
  }
  return true;
}

std::string BytesToUnicode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += ByteToUnicode(static_cast<uint8_t>(c));
  return out;
}

}  // namespace baton::tokenizer
