// `baton worker`: serves one model's engine over gRPC (baton.internal.v1.Worker and
// KvEvents, grpc.health.v1, server reflection) until SIGINT or SIGTERM.
#pragma once

#include "CLI/CLI.hpp"

namespace baton::tools {

void AddWorkerCommand(CLI::App& app);

}  // namespace baton::tools
