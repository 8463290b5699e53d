#include "tools/worker_command.h"

#include <signal.h>

#include <cstdio>
#include <iostream>
#include <memory>

#include "common/status.h"
#include "common/stop_signals.h"
#include "tools/worker_runtime.h"

namespace baton::tools {
namespace {

absl::Status Run(const WorkerFlags& flags) {
  BlockStopSignals();  // before any thread starts, so that only the wait below sees them
  BATON_ASSIGN_OR_RETURN(std::unique_ptr<WorkerRuntime> worker, WorkerRuntime::Start(flags));
  // The first stdout line says where it listens: scripts and tests read the port here
  // (with --port 0 the system picks one).
  std::printf("baton worker: serving %s on %s:%d (%lld KV pages of %lld tokens)\n",
              worker->model().name.c_str(), flags.host.c_str(), worker->port(),
              static_cast<long long>(worker->engine().num_kv_pages()),
              static_cast<long long>(flags.block_size));
  std::fflush(stdout);

  const int signal = WaitForStopSignal();
  std::fprintf(stderr, "baton worker: %s, stopping\n", signal == SIGINT ? "SIGINT" : "SIGTERM");
  // Open calls get a second to finish; then gRPC cancels them, which cancels their
  // requests in the engine. (With a client still connected, gRPC 1.51's sync server
  // always waits out this deadline.)
  worker->Shutdown(absl::Seconds(1));
  return absl::OkStatus();
}

}  // namespace

void AddWorkerCommand(CLI::App& app) {
  auto f = std::make_shared<WorkerFlags>();
  CLI::App* cmd = app.add_subcommand(
      "worker", "Serve a model's engine over gRPC (internal worker API) until Ctrl-C");
  cmd->add_option("--model", f->model, "A .gguf file or a Hugging Face model directory")
      ->required()
      ->envname("BATON_MODEL");
  cmd->add_option("--host", f->host, "Address to listen on")->envname("BATON_HOST");
  cmd->add_option("--port", f->port, "gRPC port (0: any free port, printed on stdout)")
      ->envname("BATON_WORKER_PORT")
      ->check(CLI::Range(0, 65535));
  AddEngineFlags(cmd, f.get());
  cmd->callback([f] {
    absl::Status status = Run(*f);
    if (!status.ok()) {
      std::cerr << "baton worker: " << status.message() << "\n";
      throw CLI::RuntimeError(1);
    }
  });
}

}  // namespace baton::tools
