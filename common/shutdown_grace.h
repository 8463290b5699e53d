// --shutdown-grace-seconds: how long a drain on SIGTERM lets the work in flight finish
// before it is ended with an error that says so (docs/operations.md, "Drain"). Every
// serving binary has it, with the same default, so that one Kubernetes
// terminationGracePeriodSeconds fits them all.
#pragma once

#include "CLI/CLI.hpp"

namespace baton {

inline constexpr double kDefaultShutdownGraceSeconds = 30;

void AddShutdownGraceFlag(CLI::App* cmd, double* seconds);

}  // namespace baton
