#include "common/secret_token.h"

#include <cctype>

#include "common/check.h"
#include "common/mapped_file.h"
#include "common/strings.h"
#include "openssl/crypto.h"
#include "openssl/rand.h"

namespace baton {

absl::StatusOr<std::string> ReadTokenFile(const std::string& path, std::string_view flag) {
  // A few bytes of slack for trailing whitespace.
  absl::StatusOr<std::string> token = ReadFileToString(path, kMaxTokenBytes + 64);
  if (!token.ok()) {
    return absl::Status(token.status().code(), StrCat(flag, ": ", token.status().message()));
  }
  while (!token->empty() && std::isspace(static_cast<unsigned char>(token->back()))) {
    token->pop_back();
  }
  if (token->size() < kMinTokenBytes || token->size() > kMaxTokenBytes) {
    return absl::InvalidArgumentError(
        StrCat(flag, " ", path, " holds ", token->size(), " bytes; a token is ", kMinTokenBytes,
               " to ", kMaxTokenBytes, " (e.g. `head -c 32 /dev/urandom | base64 > token`)"));
  }
  return token;
}

bool TokenMatches(std::string_view given, std::string_view secret) {
  // The length is not secret; the bytes are compared in constant time.
  return !secret.empty() && given.size() == secret.size() &&
         CRYPTO_memcmp(given.data(), secret.data(), secret.size()) == 0;
}

std::string RandomToken() {
  unsigned char bytes[32];
  BATON_CHECK(RAND_bytes(bytes, sizeof(bytes)) == 1);  // fails only without entropy
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

}  // namespace baton
