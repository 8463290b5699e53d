#include "common/shutdown_grace.h"

namespace baton {

void AddShutdownGraceFlag(CLI::App* cmd, double* seconds) {
  cmd->add_option("--shutdown-grace-seconds", *seconds,
                  "On SIGTERM, how long requests in flight may go on (new ones are turned "
                  "away: 503 with Retry-After, or UNAVAILABLE); those left then end with an "
                  "error saying so")
      ->envname("BATON_SHUTDOWN_GRACE_SECONDS")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
}

}  // namespace baton
