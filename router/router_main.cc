// baton-router: the front door. Serves the OpenAI-compatible HTTP API and the baton.v1
// gRPC API, renders chat templates and tokenizes, and runs requests on a worker
// (`baton worker`) over its internal gRPC API. Stops gracefully on SIGINT or SIGTERM.
#include <signal.h>

#include <cstdio>
#include <exception>
#include <iostream>
#include <memory>
#include <optional>

#include "CLI/CLI.hpp"
#include "common/cli_setup.h"
#include "common/log.h"
#include "common/status.h"
#include "common/stop_signals.h"
#include "common/strings.h"
#include "router/router_flags.h"
#include "router/router_server.h"

namespace {

absl::Status Run(const baton::router::RouterFlags& flags) {
  baton::BlockStopSignals();
  BATON_ASSIGN_OR_RETURN(baton::router::RouterOptions options,
                         baton::router::ToRouterOptions(flags));
  const std::string worker =
      options.decode_workers.empty()
          ? options.worker
          : baton::StrCat("decode ", options.decode_workers, ", prefill ", options.prefill_workers);
  baton::LogInfo("baton-router: waiting for the worker at %s", worker.c_str());
  BATON_ASSIGN_OR_RETURN(auto router, baton::router::RouterServer::Start(options));
  // The first stdout line says where it listens (scripts and tests read the ports here).
  std::printf("baton-router: serving %s on %s://%s:%d (gRPC %s:%d), worker %s\n",
              router->model().name().c_str(), router->http_scheme(), options.host.c_str(),
              router->http_port(), options.host.c_str(), router->grpc_port(), worker.c_str());
  std::fflush(stdout);
  const int signal = baton::WaitForStopSignal();
  baton::LogInfo("baton-router: %s, draining", signal == SIGINT ? "SIGINT" : "SIGTERM");
  router->Drain(absl::Seconds(flags.shutdown_grace_seconds));
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  try {
    CLI::App app{"baton-router: the OpenAI-compatible HTTP and baton.v1 gRPC front door"};
    baton::BeginCli(&app, "baton-router");
    baton::router::RouterFlags flags;
    baton::router::AddRouterFlags(&app, &flags, /*with_model=*/true);
    baton::router::AddWorkerListFlags(&app, &flags);
    baton::router::AddRouterMetricsFlags(&app, &flags);
    if (std::optional<int> exit = baton::ParseCli(&app, argc, argv)) return *exit;
    absl::Status status = Run(flags);
    if (!status.ok()) {
      std::cerr << "baton-router: " << status.message() << "\n";
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "baton-router: " << e.what() << "\n";
    return 1;
  }
}
