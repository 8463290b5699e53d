#include "worker/worker_main.h"

#include <signal.h>

#include <cstdio>
#include <exception>
#include <iostream>
#include <memory>
#include <optional>

#include "common/cli_setup.h"
#include "common/host_port.h"
#include "common/log.h"
#include "common/shutdown_grace.h"
#include "common/status.h"
#include "common/stop_signals.h"
#include "worker/group_ranks.h"

namespace baton::worker {

void AddWorkerFlags(CLI::App* cmd, WorkerFlags* f, const std::string& fixed_role) {
  cmd->add_option("model,--model", f->model, "A .gguf file or a Hugging Face model directory")
      ->required()
      ->envname("BATON_MODEL");
  cmd->add_option("--host", f->host, "Address to listen on")->envname("BATON_HOST");
  cmd->add_option("--port", f->port, "gRPC port (0: any free port, printed on stdout)")
      ->envname("BATON_WORKER_PORT")
      ->check(CLI::Range(0, 65535));
  if (fixed_role.empty()) {
    cmd->add_option("--role", f->role,
                    "colocated (prefill and decode), prefill or decode (disaggregated serving)")
        ->envname("BATON_ROLE")
        ->check(CLI::IsMember({"colocated", "prefill", "decode"}));
  } else {
    f->role = fixed_role;
    f->rank_command.clear();
  }
  AddEngineFlags(cmd, f);
  AddTransferFlags(cmd, f);
  AddGroupFlags(cmd, f);
  service::AddInternalAuthFlags(cmd, &f->auth, /*serves=*/true);
  AddShutdownGraceFlag(cmd, &f->shutdown_grace_seconds);
}

absl::Status RunWorker(const WorkerFlags& flags, const std::string& name) {
  if (flags.group_rank > 0) return RunGroupRank(flags, name);
  BlockStopSignals();  // before any thread starts, so that only the wait below sees them
  LogInfo("%s: loading %s", name.c_str(), flags.model.c_str());
  BATON_ASSIGN_OR_RETURN(std::shared_ptr<const service::InternalAuth> auth,
                         service::InternalAuth::Load(flags.auth));
  BATON_ASSIGN_OR_RETURN(std::unique_ptr<WorkerRuntime> worker, WorkerRuntime::Start(flags, auth));
  if (auth->open()) {
    LogWarn(
        "%s: the internal API on %s is open to anyone who can reach it; give "
        "--internal-token-file (or --tls-cert, --tls-key, --tls-ca) to require a "
        "credential",
        name.c_str(), HostPort(flags.host, worker->port()).c_str());
  } else {
    LogInfo("%s: internal calls need the %s", name.c_str(), auth->Describe().c_str());
  }
  // With --port 0 the system picks the port; this line says which.
  std::printf("%s: serving %s on %s (%lld %s KV pages of %lld tokens), role %s", name.c_str(),
              worker->model().name.c_str(), HostPort(flags.host, worker->port()).c_str(),
              static_cast<long long>(worker->engine().num_kv_pages()),
              worker->engine().kv_layout().dtype.c_str(), static_cast<long long>(flags.block_size),
              worker->role().c_str());
  if (worker->metrics_port() >= 0) {
    std::printf(", metrics http://%s/metrics",
                HostPort(flags.host, worker->metrics_port()).c_str());
  }
  if (flags.group_size() > 1) {
    std::printf(", group tp=%d pp=%d", flags.tensor_parallel_size, flags.pipeline_parallel_size);
  }
  std::printf("\n");
  std::fflush(stdout);

  const int signal = WaitForStopSignal();
  LogInfo("%s: %s, stopping", name.c_str(), signal == SIGINT ? "SIGINT" : "SIGTERM");
  // Calls in flight get the grace; those left then end UNAVAILABLE, saying why, and the
  // router continues their streams elsewhere. (With a client still connected, gRPC 1.51's
  // sync server always waits out the last second.)
  worker->Drain(absl::Seconds(flags.shutdown_grace_seconds));
  return absl::OkStatus();
}

int RoleWorkerMain(const std::string& name, const std::string& role, const std::string& about,
                   int argc, char** argv) {
  try {
    CLI::App app{about, name};
    BeginCli(&app, name);
    WorkerFlags flags;
    AddWorkerFlags(&app, &flags, role);
    if (std::optional<int> exit = ParseCli(&app, argc, argv)) return *exit;
    absl::Status status = RunWorker(flags, name);
    if (!status.ok()) {
      std::cerr << name << ": " << status.message() << "\n";
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << name << ": " << e.what() << "\n";
    return 1;
  }
}

}  // namespace baton::worker
