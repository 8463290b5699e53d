// `baton tokenize`: text on stdin -> ids on stdout (or the inverse with --decode).
#pragma once

#include "CLI/CLI.hpp"

namespace baton::tools {

// Registers the subcommand on `app`; it runs when parsed.
void AddTokenizeCommand(CLI::App& app);

}  // namespace baton::tools
