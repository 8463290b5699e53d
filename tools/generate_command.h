// `baton generate`: runs one prompt through a model on the CPU and streams the text.
#pragma once

#include "CLI/CLI.hpp"

namespace baton::tools {

void AddGenerateCommand(CLI::App& app);

}  // namespace baton::tools
