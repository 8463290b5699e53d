#include "service/tls_context.h"

#include <openssl/err.h>

#include "common/mapped_file.h"
#include "common/strings.h"
#include "grpcpp/security/credentials.h"

namespace baton::service {
namespace {

std::string OpenSslError() {
  const unsigned long e = ERR_get_error();
  if (e == 0) return "unknown error";
  char text[256];
  ERR_error_string_n(e, text, sizeof(text));
  return text;
}

absl::Status CheckBoth(const PublicTlsFiles& files, const std::string& prefix) {
  if (files.cert.empty() || files.key.empty()) {
    return absl::InvalidArgumentError(StrCat("give both ", prefix, "cert and ", prefix,
                                             "key for TLS on the public ports, or neither"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<SSL_CTX>> ServerTlsContext(const PublicTlsFiles& files,
                                                          const std::string& flag_prefix) {
  if (absl::Status s = CheckBoth(files, flag_prefix); !s.ok()) return s;
  std::shared_ptr<SSL_CTX> ctx(SSL_CTX_new(TLS_server_method()), SSL_CTX_free);
  if (ctx == nullptr) return absl::InternalError(StrCat("TLS context: ", OpenSslError()));
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  ERR_clear_error();
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), files.cert.c_str()) != 1) {
    return absl::InvalidArgumentError(StrCat(
        flag_prefix, "cert ", files.cert, ": not a PEM certificate chain (", OpenSslError(), ")"));
  }
  if (SSL_CTX_use_PrivateKey_file(ctx.get(), files.key.c_str(), SSL_FILETYPE_PEM) != 1) {
    return absl::InvalidArgumentError(
        StrCat(flag_prefix, "key ", files.key, ": not a PEM private key (", OpenSslError(), ")"));
  }
  if (SSL_CTX_check_private_key(ctx.get()) != 1) {
    return absl::InvalidArgumentError(StrCat(flag_prefix, "key ", files.key, " does not match ",
                                             flag_prefix, "cert ", files.cert));
  }
  return ctx;
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerTlsCredentials(
    const PublicTlsFiles& files, const std::string& flag_prefix) {
  // The OpenSSL context checks the files and says which is wrong; gRPC would only fail to
  // start.
  if (absl::StatusOr<std::shared_ptr<SSL_CTX>> ctx = ServerTlsContext(files, flag_prefix);
      !ctx.ok()) {
    return ctx.status();
  }
  constexpr size_t kMaxPemBytes = size_t{1} << 20;
  absl::StatusOr<std::string> cert = ReadFileToString(files.cert, kMaxPemBytes);
  absl::StatusOr<std::string> key = ReadFileToString(files.key, kMaxPemBytes);
  if (!cert.ok()) return cert.status();
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions options;
  options.pem_key_cert_pairs.push_back({*key, *cert});
  return grpc::SslServerCredentials(options);
}

}  // namespace baton::service
