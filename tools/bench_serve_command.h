// `baton bench serve`: a load generator for a running server (vLLM's `bench serve`).
#pragma once

#include "CLI/CLI.hpp"

namespace baton::tools {

// Adds `bench` with its `serve` subcommand.
void AddBenchCommand(CLI::App& app);

}  // namespace baton::tools
