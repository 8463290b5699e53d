// The TLS contexts of the public ports: HTTPS on the OpenAI port (an OpenSSL context for
// HttpServer) and TLS on the public gRPC port (gRPC's SSL credentials), from one
// certificate chain and key.
#pragma once

#include <openssl/ssl.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/security/server_credentials.h"

namespace baton::service {

struct PublicTlsFiles {
  std::string cert;  // PEM certificate chain, the server's first
  std::string key;   // PEM private key
  bool enabled() const { return !cert.empty() || !key.empty(); }
};

// TLS 1.2 and up. Errors name the flags (`flag_prefix` + "cert" / "key").
absl::StatusOr<std::shared_ptr<SSL_CTX>> ServerTlsContext(const PublicTlsFiles& files,
                                                          const std::string& flag_prefix);
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerTlsCredentials(
    const PublicTlsFiles& files, const std::string& flag_prefix);

}  // namespace baton::service
