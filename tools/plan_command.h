// `baton plan`: what a model needs on a device (KV bytes per token, weights per rank,
// tokens and conversations that fit, the decode floor, a prefill estimate, the batch at
// which decode turns compute-bound), from its config and tensor sizes alone.
// docs/operations.md, "Capacity planning: baton plan".
#pragma once

#include "CLI/CLI.hpp"

namespace baton::tools {

// Registers the subcommand on `app`; it runs when parsed.
void AddPlanCommand(CLI::App& app);

}  // namespace baton::tools
