// `baton serve`: a local cluster — by default in one process, one colocated worker
// (prefill and decode) on a loopback port; with --prefill N --decode M, N prefill and M
// decode workers in their own processes (tools/local_cluster.h). The router in front: the
// OpenAI-compatible HTTP API on --port and the baton.v1 gRPC API on --grpc-port.
#pragma once

#include "CLI/CLI.hpp"

namespace baton::tools {

void AddServeCommand(CLI::App& app);

}  // namespace baton::tools
