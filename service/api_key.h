// API keys for the front door, `Authorization: Bearer <key>` as OpenAI clients send it, and
// the tenant each key belongs to (--api-key, --api-key-file; docs/security.md).
#pragma once

#include <climits>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace baton::service {

// Whose request this is, as its API key says.
struct Tenant {
  std::string name;
  // The prefix-cache namespace the server derives for the tenant (an HMAC of its name
  // under a server secret): requests of different tenants never share cached blocks, so
  // `cached_tokens` tells nobody about another tenant's prompts. Empty without API keys.
  std::string cache_namespace;
  // A request's priority is raised to at least this (a lower value goes first): a client
  // may lower its own priority, never raise it above its tenant's ceiling.
  int min_priority = INT_MIN;
};

// What `tenant` makes of a request's own priority and cache_salt: the priority raised to
// the tenant's ceiling, the salt inside the tenant's namespace ("<namespace>/<salt>").
int TenantPriority(const Tenant& tenant, int priority);
std::string TenantCacheSalt(const Tenant& tenant, const std::string& cache_salt);

class ApiKeys {
 public:
  // No keys: no key is asked for, and every caller is one anonymous tenant.
  ApiKeys();

  // `api_key` (--api-key, may be empty) is one key of tenant "default"; `key_file`
  // (--api-key-file, may be empty) holds lines `KEY TENANT [MIN_PRIORITY]`, with `#`
  // comments and blank lines (MIN_PRIORITY defaults to 0). `secret` keys the tenants'
  // cache namespaces: routers that share it (the cluster token) give a tenant the same
  // namespace. InvalidArgument naming the file and line for a malformed line, a repeated
  // key or a tenant name outside [A-Za-z0-9_.-]{1,64}.
  static absl::StatusOr<std::shared_ptr<const ApiKeys>> Create(const std::string& api_key,
                                                               const std::string& key_file,
                                                               std::string_view secret);

  bool required() const { return !keys_.empty(); }
  // The tenant of the key in `authorization` (the header's value: "Bearer <key>", or
  // "Basic" credentials whose password is the key, as a browser sends them), or null when
  // no key matches. Every key is compared, each in time that depends only on what was sent. Without
  // keys: the anonymous tenant.
  const Tenant* Find(std::string_view authorization) const;

 private:
  std::vector<std::pair<std::string, size_t>> keys_;  // key, index into tenants_
  std::vector<Tenant> tenants_;                       // tenants_[0]: the anonymous one
};

// True when `authorization` (the header's value) is "Bearer <key>" with the scheme in any
// case and `<key>` equal to `api_key`. The comparison takes time that depends on the length of
// what the client sent, never on where it differs from the key. An empty `api_key` matches
// nothing: whether auth is required at all is the caller's decision.
bool BearerTokenMatches(std::string_view authorization, std::string_view api_key);

}  // namespace baton::service
