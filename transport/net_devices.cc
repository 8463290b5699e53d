#include "transport/net_devices.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>
#include <vector>

#include "common/strings.h"

namespace baton::transport {
namespace {

bool SameAddress(const sockaddr* a, const sockaddr* b) {
  if (a == nullptr || b == nullptr || a->sa_family != b->sa_family) return false;
  if (a->sa_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(b)->sin_addr.s_addr;
  }
  if (a->sa_family == AF_INET6) {
    return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
                       &reinterpret_cast<const sockaddr_in6*>(b)->sin6_addr, sizeof(in6_addr)) == 0;
  }
  return false;
}

bool IsWildcard(const sockaddr* a) {
  if (a->sa_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr == htonl(INADDR_ANY);
  }
  if (a->sa_family == AF_INET6) {
    return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr);
  }
  return false;
}

}  // namespace

std::vector<std::string> RdmaPorts() {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& dev : std::filesystem::directory_iterator("/sys/class/infiniband", ec)) {
    std::error_code port_ec;
    for (const auto& port : std::filesystem::directory_iterator(dev.path() / "ports", port_ec)) {
      out.push_back(StrCat(dev.path().filename().string(), ":", port.path().filename().string()));
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

absl::StatusOr<std::string> NetDevicesFor(std::string_view host, std::string_view flag) {
  if (host.empty()) return std::string();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* resolved = nullptr;
  const std::string name(host);
  if (const int rc = ::getaddrinfo(name.c_str(), nullptr, &hints, &resolved); rc != 0) {
    return absl::InvalidArgumentError(
        StrCat(flag, " '", host, "' does not resolve: ", ::gai_strerror(rc)));
  }
  ifaddrs* interfaces = nullptr;
  if (::getifaddrs(&interfaces) != 0) {
    ::freeaddrinfo(resolved);
    return absl::InternalError(
        StrCat("cannot list the network interfaces: ", std::strerror(errno)));
  }
  bool wildcard = false;
  std::set<std::string> names;
  for (const addrinfo* a = resolved; a != nullptr; a = a->ai_next) {
    wildcard = wildcard || IsWildcard(a->ai_addr);
    for (const ifaddrs* i = interfaces; i != nullptr; i = i->ifa_next) {
      if (SameAddress(a->ai_addr, i->ifa_addr)) names.insert(i->ifa_name);
    }
  }
  ::freeifaddrs(interfaces);
  ::freeaddrinfo(resolved);
  if (wildcard) return std::string();
  if (names.empty()) {
    return absl::NotFoundError(
        StrCat(flag, " '", host,
               "' is not an address of any network interface of this host, so UCX could not listen "
               "on it; give one of this host's addresses (or 0.0.0.0 to let UCX use every "
               "interface)"));
  }
  std::string devices;
  for (const std::string& n : names) devices += devices.empty() ? n : StrCat(",", n);
  for (const std::string& p : RdmaPorts()) devices += StrCat(",", p);
  return devices;
}

}  // namespace baton::transport
