// The cluster's shared secret (--internal-token-file): reading it, comparing what a caller
// presents with it, and making one. Every internal port of a Baton cluster checks the same
// token: the group rendezvous (parallel/tcp_store.h) and the internal gRPC services
// (service/internal_auth.h).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace baton {

// A shorter token would be guessable; a longer file is not a token.
inline constexpr size_t kMinTokenBytes = 16;
inline constexpr size_t kMaxTokenBytes = 4096;

// The file's bytes without trailing whitespace (an editor's newline). InvalidArgument
// naming `flag` and the file when it is shorter than kMinTokenBytes or longer than
// kMaxTokenBytes; the file's own error when it cannot be read.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path, std::string_view flag);

// Whether `given` equals `secret`, in time that depends on their lengths only (OpenSSL's
// CRYPTO_memcmp): a caller cannot learn the token a byte at a time.
bool TokenMatches(std::string_view given, std::string_view secret);

// 32 random bytes from OpenSSL's generator, as 64 hex digits.
std::string RandomToken();

}  // namespace baton
