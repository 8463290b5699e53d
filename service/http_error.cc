#include "service/http_error.h"

#include "common/strings.h"
#include "common/utf8.h"

namespace baton::service {

std::string JsonQuote(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (char c : SanitizeUtf8(s)) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += "\\u00";
          out += kHex[(c >> 4) & 0xf];
          out += kHex[c & 0xf];
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

std::string OpenAiErrorJson(std::string_view message, std::string_view type) {
  return StrCat(R"({"error":{"message":)", JsonQuote(message), R"(,"type":)", JsonQuote(type),
                R"(,"param":null,"code":null}})");
}

}  // namespace baton::service
