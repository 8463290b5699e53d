// `baton synth-model`: writes a random-weight model of a real shape (HF directory and/or
// GGUF), for tests and benchmarks without downloads.
#pragma once

#include "CLI/CLI.hpp"

namespace baton::tools {

// Registers the subcommand on `app`; it runs when parsed.
void AddSynthModelCommand(CLI::App& app);

}  // namespace baton::tools
