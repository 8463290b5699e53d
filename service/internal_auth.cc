#include "service/internal_auth.h"

#include <utility>
#include <vector>

#include "common/mapped_file.h"
#include "common/secret_token.h"
#include "common/status.h"
#include "common/strings.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "grpcpp/support/client_interceptor.h"

namespace baton::service {
namespace {

constexpr size_t kMaxPemBytes = size_t{1} << 20;

// Adds the token to every call's initial metadata: gRPC sends call credentials only over
// TLS, and the token must also work on loopback without it.
class TokenInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit TokenInterceptor(const std::string* token) : token_(token) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace(kInternalTokenKey, *token_);
    }
    methods->Proceed();
  }

 private:
  const std::string* token_;
};

class TokenInterceptorFactory final : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit TokenInterceptorFactory(std::shared_ptr<const InternalAuth> auth)
      : auth_(std::move(auth)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* /*info*/) override {
    return new TokenInterceptor(&auth_->token());
  }

 private:
  std::shared_ptr<const InternalAuth> auth_;  // keeps the token alive with the channel
};

bool IsLoopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.starts_with("127.");
}

absl::StatusOr<std::string> ReadPem(const std::string& path, const char* flag) {
  absl::StatusOr<std::string> pem = ReadFileToString(path, kMaxPemBytes);
  if (!pem.ok()) {
    return absl::Status(pem.status().code(), StrCat(flag, ": ", pem.status().message()));
  }
  if (pem->find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(StrCat(flag, " ", path, " is not a PEM file"));
  }
  return pem;
}

}  // namespace

void AddInternalAuthFlags(CLI::App* cmd, InternalAuthFlags* f, bool serves) {
  cmd->add_option("--internal-token-file", f->token_file,
                  "A file holding the cluster's secret token (16 to 4096 bytes): every internal "
                  "call presents it, and every internal server refuses calls without it")
      ->envname("BATON_INTERNAL_TOKEN_FILE");
  cmd->add_option("--tls-cert", f->tls_cert,
                  "Internal gRPC over mutual TLS: this process's certificate chain (PEM)")
      ->envname("BATON_TLS_CERT");
  cmd->add_option("--tls-key", f->tls_key, "Internal gRPC over mutual TLS: its private key (PEM)")
      ->envname("BATON_TLS_KEY");
  cmd->add_option("--tls-ca", f->tls_ca,
                  "Internal gRPC over mutual TLS: the CA that signs every process of the "
                  "cluster (PEM); peers without a certificate it signed are refused")
      ->envname("BATON_TLS_CA");
  if (!serves) return;
  cmd->add_flag("--allow-open-internal", f->allow_open,
                "Serve the internal API without a credential on an address other than "
                "loopback (only on a private network you trust)")
      ->envname("BATON_ALLOW_OPEN_INTERNAL");
}

std::vector<std::string> InternalAuthArgs(const InternalAuthFlags& f) {
  std::vector<std::string> args;
  if (!f.token_file.empty()) args.insert(args.end(), {"--internal-token-file", f.token_file});
  if (!f.tls_cert.empty()) args.insert(args.end(), {"--tls-cert", f.tls_cert});
  if (!f.tls_key.empty()) args.insert(args.end(), {"--tls-key", f.tls_key});
  if (!f.tls_ca.empty()) args.insert(args.end(), {"--tls-ca", f.tls_ca});
  if (f.allow_open) args.emplace_back("--allow-open-internal");
  return args;
}

absl::StatusOr<std::shared_ptr<const InternalAuth>> InternalAuth::Load(
    const InternalAuthFlags& flags) {
  std::shared_ptr<InternalAuth> auth(new InternalAuth());
  if (!flags.token_file.empty()) {
    BATON_ASSIGN_OR_RETURN(auth->token_, ReadTokenFile(flags.token_file, "--internal-token-file"));
  }
  const int given =
      !flags.tls_cert.empty() + !flags.tls_key.empty() + !flags.tls_ca.empty();  // NOLINT
  if (given != 0 && given != 3) {
    return absl::InvalidArgumentError(
        "mutual TLS needs all three of --tls-cert, --tls-key and --tls-ca (this process's "
        "certificate, its key, and the cluster's CA)");
  }
  if (given == 3) {
    BATON_ASSIGN_OR_RETURN(auth->tls_cert_, ReadPem(flags.tls_cert, "--tls-cert"));
    BATON_ASSIGN_OR_RETURN(auth->tls_key_, ReadPem(flags.tls_key, "--tls-key"));
    BATON_ASSIGN_OR_RETURN(auth->tls_ca_, ReadPem(flags.tls_ca, "--tls-ca"));
  }
  return auth;
}

std::shared_ptr<const InternalAuth> InternalAuth::WithToken(std::string token) {
  std::shared_ptr<InternalAuth> auth(new InternalAuth());
  auth->token_ = std::move(token);
  return auth;
}

std::shared_ptr<const InternalAuth> InternalAuth::Open() {
  return std::shared_ptr<const InternalAuth>(new InternalAuth());
}

std::string InternalAuth::Describe() const {
  if (!token_.empty() && tls()) return "cluster token and mutual TLS";
  if (!token_.empty()) return "cluster token";
  if (tls()) return "mutual TLS";
  return "no credential";
}

std::shared_ptr<grpc::ServerCredentials> InternalAuth::ServerCredentials() const {
  if (!tls()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions o(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  o.pem_root_certs = tls_ca_;
  o.pem_key_cert_pairs.push_back({tls_key_, tls_cert_});
  return grpc::SslServerCredentials(o);
}

std::shared_ptr<grpc::Channel> InternalAuth::Channel(const std::string& target) const {
  // Keepalive pings notice a peer that stopped (SIGSTOP, a dead host, a cut link) under a
  // long-lived token stream within about 2 s: a ping every second, answered within one.
  // Without a limit on pings between data frames: a decode stream sends no data upward.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 1000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 1000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // Reconnect within a second after a restart instead of gRPC's default backoff of up to
  // two minutes. Not GRPC_ARG_MIN_RECONNECT_BACKOFF_MS: gRPC also takes it as the shortest
  // connection attempt (20 s by default), and at 100 ms a handshake on a loaded machine
  // timed out before the peer's SETTINGS frame, failing a KV Reserve to a healthy worker.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (tls()) {
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = tls_ca_;
    o.pem_private_key = tls_key_;
    o.pem_cert_chain = tls_cert_;
    credentials = grpc::SslCredentials(o);
  } else {
    credentials = grpc::InsecureChannelCredentials();
  }
  if (token_.empty()) return grpc::CreateCustomChannel(target, credentials, args);
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<TokenInterceptorFactory>(shared_from_this()));
  return grpc::experimental::CreateCustomChannelWithInterceptors(target, credentials, args,
                                                                 std::move(interceptors));
}

std::string CallerOf(const grpc::ServerContextBase& context) {
  // "ipv4:10.0.0.7:41234", "ipv6:[::1]:41234": the port is the last colon's.
  std::string address = context.peer();
  if (const size_t colon = address.rfind(':');
      colon != std::string::npos && address.find(':') != colon) {
    address.resize(colon);
  }
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) return address;
  std::string identity;
  for (const grpc::string_ref& name : auth->GetPeerIdentity()) {
    if (!identity.empty()) identity += ',';
    identity.append(name.data(), name.size());
  }
  return identity + "@" + address;
}

grpc::Status InternalAuth::Check(const grpc::ServerContextBase& context) const {
  if (tls()) {
    // The handshake already required a certificate the CA signed; this is the same fact.
    std::shared_ptr<const grpc::AuthContext> peer = context.auth_context();
    if (peer == nullptr || !peer->IsPeerAuthenticated()) {
      return {grpc::StatusCode::UNAUTHENTICATED,
              "this internal API takes only peers with a certificate the cluster's --tls-ca "
              "signed"};
    }
  }
  if (token_.empty()) return grpc::Status::OK;
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(kInternalTokenKey);
  if (it == metadata.end()) {
    return {grpc::StatusCode::UNAUTHENTICATED,
            "this internal API needs the cluster token: start the caller with the same "
            "--internal-token-file as this process"};
  }
  if (!TokenMatches(std::string_view(it->second.data(), it->second.size()), token_)) {
    return {grpc::StatusCode::UNAUTHENTICATED,
            "the cluster token presented does not match this process's --internal-token-file"};
  }
  return grpc::Status::OK;
}

absl::Status InternalAuth::CheckListen(const std::string& host, bool allow_open,
                                       const std::string& what) const {
  if (!open() || allow_open || IsLoopback(host)) return absl::OkStatus();
  return absl::InvalidArgumentError(StrCat(
      what, " would serve its internal API on ", host,
      " to anyone who can reach it: give --internal-token-file FILE (the same secret file for "
      "every process of the cluster), or --tls-cert, --tls-key and --tls-ca, or "
      "--allow-open-internal on a private network you trust"));
}

}  // namespace baton::service
