#include "tools/worker_command.h"

#include <iostream>
#include <memory>

#include "worker/worker_main.h"

namespace baton::tools {

void AddWorkerCommand(CLI::App& app) {
  auto f = std::make_shared<worker::WorkerFlags>();
  CLI::App* cmd = app.add_subcommand(
      "worker", "Serve a model's engine over gRPC (internal worker API) until Ctrl-C");
  worker::AddWorkerFlags(cmd, f.get());
  cmd->callback([f] {
    absl::Status status = worker::RunWorker(*f, "baton worker");
    if (!status.ok()) {
      std::cerr << "baton worker: " << status.message() << "\n";
      throw CLI::RuntimeError(1);
    }
  });
}

}  // namespace baton::tools
