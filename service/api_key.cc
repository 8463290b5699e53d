#include "service/api_key.h"

#include <algorithm>
#include <cstddef>
#include <sstream>

#include "absl/strings/escaping.h"
#include "common/mapped_file.h"
#include "common/strings.h"
#include "openssl/evp.h"
#include "openssl/hmac.h"

namespace baton::service {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = (a[i] >= 'A' && a[i] <= 'Z') ? static_cast<char>(a[i] - 'A' + 'a') : a[i];
    if (x != b[i]) return false;
  }
  return true;
}

// Visits every byte of `given` whatever it holds, so the time reveals only given's length.
bool ConstantTimeEquals(std::string_view given, std::string_view key) {
  volatile unsigned char diff = given.size() == key.size() ? 0 : 1;
  for (size_t i = 0; i < given.size(); ++i) {
    diff = diff | static_cast<unsigned char>(given[i] ^ key[i % key.size()]);
  }
  return diff == 0;
}

}  // namespace

bool BearerTokenMatches(std::string_view authorization, std::string_view api_key) {
  if (api_key.empty()) return false;
  std::string_view value = Trim(authorization);
  size_t space = value.find_first_of(" \t");
  if (space == std::string_view::npos) return false;
  if (!EqualsIgnoreCase(value.substr(0, space), "bearer")) return false;
  std::string_view token = Trim(value.substr(space));
  if (token.empty()) return false;
  return ConstantTimeEquals(token, api_key);
}

namespace {

constexpr size_t kMaxKeyFileBytes = size_t{16} << 20;

bool IsTenantName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
  });
}

// The first 128 bits of HMAC-SHA256(secret, tenant), as hex: a namespace no client can
// choose or guess without the secret.
std::string CacheNamespace(std::string_view secret, std::string_view tenant) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  const std::string message = StrCat("baton cache namespace\n", tenant);
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &len);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "tenant:";
  for (unsigned int i = 0; i < 16 && i < len; ++i) {
    out += kHex[mac[i] >> 4];
    out += kHex[mac[i] & 15];
  }
  return out;
}

}  // namespace

int TenantPriority(const Tenant& tenant, int priority) {
  return std::max(priority, tenant.min_priority);
}

std::string TenantCacheSalt(const Tenant& tenant, const std::string& cache_salt) {
  if (tenant.cache_namespace.empty()) return cache_salt;
  if (cache_salt.empty()) return tenant.cache_namespace;
  return StrCat(tenant.cache_namespace, "/", cache_salt);
}

ApiKeys::ApiKeys() { tenants_.push_back(Tenant{}); }

absl::StatusOr<std::shared_ptr<const ApiKeys>> ApiKeys::Create(const std::string& api_key,
                                                               const std::string& key_file,
                                                               std::string_view secret) {
  auto keys = std::make_shared<ApiKeys>();
  auto add = [&](std::string key, const std::string& tenant, int min_priority,
                 const std::string& where) -> absl::Status {
    for (const auto& [k, t] : keys->keys_) {
      if (k == key) return absl::InvalidArgumentError(StrCat(where, ": the key is given twice"));
    }
    size_t index = keys->tenants_.size();
    for (size_t i = 1; i < keys->tenants_.size(); ++i) {
      if (keys->tenants_[i].name == tenant) index = i;
    }
    if (index == keys->tenants_.size()) {
      keys->tenants_.push_back({tenant, CacheNamespace(secret, tenant), min_priority});
    } else if (keys->tenants_[index].min_priority != min_priority) {
      return absl::InvalidArgumentError(
          StrCat(where, ": tenant '", tenant, "' was given another MIN_PRIORITY before"));
    }
    keys->keys_.emplace_back(std::move(key), index);
    return absl::OkStatus();
  };
  if (!api_key.empty()) {
    absl::Status s = add(api_key, "default", INT_MIN, "--api-key");
    if (!s.ok()) return s;
  }
  if (key_file.empty()) return std::shared_ptr<const ApiKeys>(std::move(keys));
  absl::StatusOr<std::string> text = ReadFileToString(key_file, kMaxKeyFileBytes);
  if (!text.ok()) {
    return absl::Status(text.status().code(), StrCat("--api-key-file: ", text.status().message()));
  }
  std::istringstream lines(*text);
  std::string line;
  for (int n = 1; std::getline(lines, line); ++n) {
    const std::string where = StrCat("--api-key-file ", key_file, " line ", n);
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::string key, tenant, priority, extra;
    if (!(words >> key)) continue;  // blank
    if (!(words >> tenant) || (words >> priority && words >> extra)) {
      return absl::InvalidArgumentError(StrCat(where, ": expected 'KEY TENANT [MIN_PRIORITY]'"));
    }
    if (!IsTenantName(tenant)) {
      return absl::InvalidArgumentError(
          StrCat(where, ": the tenant name must be 1 to 64 of A-Z, a-z, 0-9, '_', '.', '-'"));
    }
    int min_priority = 0;
    if (!priority.empty()) {
      size_t used = 0;
      long long v = 0;
      try {
        v = std::stoll(priority, &used);
      } catch (...) {
        used = 0;
      }
      if (used != priority.size() || v < INT_MIN || v > INT_MAX) {
        return absl::InvalidArgumentError(StrCat(where, ": MIN_PRIORITY '", priority,
                                                 "' is not an integer in [", INT_MIN, ", ", INT_MAX,
                                                 "]"));
      }
      min_priority = static_cast<int>(v);
    }
    absl::Status s = add(key, tenant, min_priority, where);
    if (!s.ok()) return s;
  }
  if (keys->keys_.empty()) {
    return absl::InvalidArgumentError(
        StrCat("--api-key-file ", key_file, " holds no key; every request would be refused"));
  }
  return std::shared_ptr<const ApiKeys>(std::move(keys));
}

namespace {

// "Basic base64(user:key)", what a browser sends once a person logged in to the inspector
// (docs/inspector.md), as "Bearer key"; anything else as it is.
std::string AsBearer(std::string_view authorization) {
  std::string_view value = Trim(authorization);
  const size_t space = value.find_first_of(" \t");
  if (space == std::string_view::npos || !EqualsIgnoreCase(value.substr(0, space), "basic")) {
    return std::string(authorization);
  }
  std::string decoded;
  const std::string_view encoded = Trim(value.substr(space));
  if (!absl::Base64Unescape(absl::string_view(encoded.data(), encoded.size()), &decoded)) {
    return std::string();
  }
  const size_t colon = decoded.find(':');
  if (colon == std::string::npos) return std::string();
  return StrCat("Bearer ", decoded.substr(colon + 1));
}

}  // namespace

const Tenant* ApiKeys::Find(std::string_view authorization) const {
  if (keys_.empty()) return &tenants_[0];
  const std::string bearer = AsBearer(authorization);
  const Tenant* found = nullptr;
  for (const auto& [key, tenant] : keys_) {  // no early exit: every key costs the same
    if (BearerTokenMatches(bearer, key)) found = &tenants_[tenant];
  }
  return found;
}

}  // namespace baton::service
