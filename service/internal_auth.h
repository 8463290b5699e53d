// Who may call a Baton process's internal gRPC services (baton.internal.v1: Worker,
// KvEvents, KvTransfer), and how this process proves itself when it calls another's.
//
// Two credentials, either or both (docs/security.md):
//  - the cluster token (--internal-token-file): every internal call carries it as the
//    `x-baton-internal-token` metadata, and every internal handler compares it in
//    constant time, answering UNAUTHENTICATED otherwise;
//  - mutual TLS (--tls-cert, --tls-key, --tls-ca): the channel is TLS, and a server
//    takes only clients whose certificate the cluster's CA signed.
// A process with neither is open: anyone who can reach its port can use it. That is
// allowed only on loopback (CheckInternalListen), and each server says so at start.
//
// The gRPC health service stays open on purpose: Kubernetes' probes cannot present a
// token, and it reveals only SERVING or NOT_SERVING.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "grpcpp/channel.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_context.h"

namespace baton::service {

// The metadata key the token travels in (lower case, as HTTP/2 requires).
inline constexpr char kInternalTokenKey[] = "x-baton-internal-token";

struct InternalAuthFlags {
  std::string token_file;  // --internal-token-file
  std::string tls_cert;    // --tls-cert: this process's certificate chain (PEM)
  std::string tls_key;     // --tls-key: its private key (PEM)
  std::string tls_ca;      // --tls-ca: the CA that signs every process of the cluster (PEM)
  // --allow-open-internal: serve the internal plane without a credential on an address
  // other than loopback (a private network the operator vouches for).
  bool allow_open = false;
};

// The flags above, with their BATON_* variables; --allow-open-internal only where the
// process `serves` the internal API (a router only calls it).
void AddInternalAuthFlags(CLI::App* cmd, InternalAuthFlags* flags, bool serves);

// The same flags as arguments, for a process that starts others (`baton serve`).
std::vector<std::string> InternalAuthArgs(const InternalAuthFlags& flags);

// Who is calling, for bounds per caller (a decode worker's reservations): the peer's IP
// address without the port, since one process's connections are one caller, and under
// mutual TLS its certificate's identity too ("NAME@ADDRESS"). A member of the cluster can
// open many connections but not change its address or its certificate.
std::string CallerOf(const grpc::ServerContextBase& context);

class InternalAuth : public std::enable_shared_from_this<InternalAuth> {
 public:
  // Reads the token and PEM files. InvalidArgument naming the flag when a file is missing,
  // a token is too short, or only some of the three TLS flags are given.
  static absl::StatusOr<std::shared_ptr<const InternalAuth>> Load(const InternalAuthFlags& flags);
  // A token held in memory: `baton serve`'s own, and tests.
  static std::shared_ptr<const InternalAuth> WithToken(std::string token);
  // No credential: loopback only.
  static std::shared_ptr<const InternalAuth> Open();

  bool open() const { return token_.empty() && !tls(); }
  bool tls() const { return !tls_cert_.empty(); }
  const std::string& token() const { return token_; }  // empty: none
  // "cluster token", "mutual TLS", "cluster token and mutual TLS" or "no credential".
  std::string Describe() const;

  // The credentials of an internal server's listening port.
  std::shared_ptr<grpc::ServerCredentials> ServerCredentials() const;
  // A channel to another Baton process, presenting this process's credentials on every
  // call, with the keepalive and reconnection settings every internal channel needs.
  std::shared_ptr<grpc::Channel> Channel(const std::string& target) const;
  // What every internal handler asks first: OK, or UNAUTHENTICATED saying what is missing.
  grpc::Status Check(const grpc::ServerContextBase& context) const;

  // Refuses to serve the internal plane open on an address other than loopback, unless
  // `allow_open`; the error says which flags to give. `what` names the server.
  absl::Status CheckListen(const std::string& host, bool allow_open, const std::string& what) const;

 private:
  InternalAuth() = default;

  std::string token_;
  std::string tls_cert_, tls_key_, tls_ca_;  // PEM contents
};

}  // namespace baton::service
