// `baton trace`: send one traced request to a running router and print its journey
// (docs/inspector.md).
#pragma once

#include "CLI/CLI.hpp"

namespace baton::tools {

// Registers the subcommand on `app`; it runs when parsed.
void AddTraceCommand(CLI::App& app);

}  // namespace baton::tools
