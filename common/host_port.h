// "host:port" for listening and dialling, with an IPv6 host in brackets ("[::1]:8000"), as
// gRPC and URLs want it: `--host ::` gives "[::]:8000", not ":::8000".
#pragma once

#include <string>
#include <string_view>

#include "common/strings.h"

namespace baton {

inline std::string HostPort(std::string_view host, int port) {
  const bool v6 = host.find(':') != std::string_view::npos && !host.starts_with('[');
  return StrCat(v6 ? "[" : "", host, v6 ? "]:" : ":", port);
}

}  // namespace baton
