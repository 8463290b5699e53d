#include "tools/serve_command.h"

#include <signal.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "common/status.h"
#include "common/stop_signals.h"
#include "common/strings.h"
#include "router/router_flags.h"
#include "router/router_server.h"
#include "tools/local_cluster.h"
#include "worker/worker_runtime.h"

namespace baton::tools {
namespace {

struct ServeFlags {
  worker::WorkerFlags worker;
  router::RouterFlags router;
  int prefill = 0;  // worker processes of a split cluster; 0 and 0: one colocated worker
  int decode = 0;
};

// `baton serve --prefill N --decode M`: the workers in their own processes, the router here.
absl::Status RunSplit(const ServeFlags& flags, router::RouterOptions options) {
  if (flags.worker.group_size() > 1) {
    return absl::UnimplementedError(
        "a split cluster of worker groups (--prefill/--decode with --tensor-parallel-size or "
        "--pipeline-parallel-size) is not built yet; serve a group colocated (without "
        "--prefill/--decode)");
  }
  std::fprintf(stderr, "baton serve: starting %d prefill and %d decode workers for %s\n",
               flags.prefill, flags.decode, flags.worker.model.c_str());
  BATON_ASSIGN_OR_RETURN(
      std::unique_ptr<LocalCluster> cluster,
      LocalCluster::Start(flags.worker, flags.prefill, flags.decode, absl::Minutes(10)));
  options.worker.clear();
  options.prefill_workers = cluster->prefill_targets();
  options.decode_workers = cluster->decode_targets();
  BATON_ASSIGN_OR_RETURN(auto router, router::RouterServer::Start(options));
  std::printf(
      "baton serve: serving %s on http://%s:%d (gRPC %s:%d), prefill workers %s, decode "
      "workers %s\n",
      router->model().name().c_str(), options.host.c_str(), router->http_port(),
      options.host.c_str(), router->grpc_port(), options.prefill_workers.c_str(),
      options.decode_workers.c_str());
  std::fflush(stdout);
  const int signal = WaitForStopSignal();
  std::fprintf(stderr, "baton serve: %s, draining\n", signal == SIGINT ? "SIGINT" : "SIGTERM");
  router->Shutdown(absl::Seconds(5));
  cluster->Stop();
  return absl::OkStatus();
}

absl::Status Run(ServeFlags flags) {
  BlockStopSignals();
  flags.worker.host = "127.0.0.1";  // the worker is internal: loopback only
  flags.router.model = flags.worker.model;
  BATON_ASSIGN_OR_RETURN(router::RouterOptions options, router::ToRouterOptions(flags.router));
  if (flags.prefill > 0 || flags.decode > 0) return RunSplit(flags, std::move(options));
  std::fprintf(stderr, "baton serve: loading %s\n", flags.worker.model.c_str());
  BATON_ASSIGN_OR_RETURN(std::unique_ptr<worker::WorkerRuntime> worker,
                         worker::WorkerRuntime::Start(flags.worker));
  options.worker = StrCat("127.0.0.1:", worker->port());
  BATON_ASSIGN_OR_RETURN(auto router, router::RouterServer::Start(options));
  // The first stdout line says where it listens (scripts and tests read the ports here).
  std::printf("baton serve: serving %s on http://%s:%d (gRPC %s:%d), worker 127.0.0.1:%d\n",
              router->model().name().c_str(), options.host.c_str(), router->http_port(),
              options.host.c_str(), router->grpc_port(), worker->port());
  std::fflush(stdout);
  const int signal = WaitForStopSignal();
  std::fprintf(stderr, "baton serve: %s, draining\n", signal == SIGINT ? "SIGINT" : "SIGTERM");
  router->Shutdown(absl::Seconds(5));
  worker->Shutdown(absl::Seconds(1));
  return absl::OkStatus();
}

}  // namespace

void AddServeCommand(CLI::App& app) {
  auto f = std::make_shared<ServeFlags>();
  f->worker.port = 0;
  f->worker.model = BATON_DEFAULT_MODEL;
  CLI::App* cmd = app.add_subcommand(
      "serve", "Serve a model locally: OpenAI-compatible HTTP and gRPC, until Ctrl-C");
  cmd->add_option("--model", f->worker.model,
                  "A .gguf file or a Hugging Face model directory (default: the bundled model)")
      ->envname("BATON_MODEL");
  router::AddRouterFlags(cmd, &f->router, /*with_model=*/false);
  cmd->add_option("--worker-port", f->worker.port,
                  "Loopback port of the internal worker API (0: any free port)")
      ->envname("BATON_WORKER_PORT")
      ->check(CLI::Range(0, 65535));
  worker::AddEngineFlags(cmd, &f->worker);
  cmd->add_option("--prefill", f->prefill,
                  "Prefill worker processes of a local split cluster (with --decode)")
      ->envname("BATON_PREFILL")
      ->check(CLI::Range(0, 64));
  cmd->add_option("--decode", f->decode,
                  "Decode worker processes of a local split cluster (with --prefill)")
      ->envname("BATON_DECODE")
      ->check(CLI::Range(0, 64));
  worker::AddTransferFlags(cmd, &f->worker);
  worker::AddGroupFlags(cmd, &f->worker);
  cmd->callback([f] {
    absl::Status status = Run(*f);
    if (!status.ok()) {
      std::cerr << "baton serve: " << status.message() << "\n";
      throw CLI::RuntimeError(1);
    }
  });
}

}  // namespace baton::tools
