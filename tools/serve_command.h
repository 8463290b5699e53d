// `baton serve`: a local cluster in one process — one colocated worker (prefill and
// decode) on a loopback port, and the router in front of it: the OpenAI-compatible HTTP
// API on --port and the baton.v1 gRPC API on --grpc-port.
#pragma once

#include "CLI/CLI.hpp"

namespace baton::tools {

void AddServeCommand(CLI::App& app);

}  // namespace baton::tools
