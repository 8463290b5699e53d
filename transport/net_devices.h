// Which network devices UCX may use, from the address a worker serves on. UCX's TCP
// transport otherwise listens on every interface of the host (eth0 as well as lo),
// whatever address the worker was told to serve on; restricting UCX_NET_DEVICES to the
// interface that holds that address makes its listener follow --host (--transfer-host).
//
//   BATON_ASSIGN_OR_RETURN(std::string devices, NetDevicesFor("127.0.0.1"));  // "lo"
//   UcxWorker::Create({.transports = "tcp", .net_devices = devices});
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace baton::transport {

// UCX_NET_DEVICES for a worker serving on `host` (an address or a name): the interface
// holding its address, plus every RDMA port (they do not listen on IP addresses, and are
// how KV crosses hosts on GPU clusters). "" (UCX's own choice) for a wildcard address
// ("", 0.0.0.0, ::). NotFound, naming `flag`, when no interface holds the address.
absl::StatusOr<std::string> NetDevicesFor(std::string_view host, std::string_view flag);

// This host's RDMA ports, as UCX names them ("<device>:<port>", mlx5_0:1), sorted.
std::vector<std::string> RdmaPorts();

}  // namespace baton::transport
