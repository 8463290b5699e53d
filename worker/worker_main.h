// The worker process: `baton worker`, `baton-prefill` (prefill_worker/) and `baton-decode`
// (decode_worker/) all run this. It serves until SIGINT or SIGTERM, and its first stdout
// line says where (scripts and tests read the port there).
#pragma once

#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "worker/worker_runtime.h"

namespace baton::worker {

// --model, --host, --port, the engine and transfer flags, and --role unless `fixed_role`
// is set (the role binaries fix theirs).
void AddWorkerFlags(CLI::App* cmd, WorkerFlags* flags, const std::string& fixed_role = "");

// Runs a worker until a stop signal; `name` prefixes its messages.
absl::Status RunWorker(const WorkerFlags& flags, const std::string& name);

// main() of a role binary: flags, BATON_* variables and --config YAML, then RunWorker.
int RoleWorkerMain(const std::string& name, const std::string& role, const std::string& about,
                   int argc, char** argv);

}  // namespace baton::worker
