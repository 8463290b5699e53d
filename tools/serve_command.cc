#include "tools/serve_command.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>

#include "common/install_paths.h"
#include "common/log.h"
#include "common/secret_token.h"
#include "common/status.h"
#include "common/stop_signals.h"
#include "common/strings.h"
#include "engine/device.h"
#include "prometheus/counter.h"
#include "router/router_flags.h"
#include "router/router_server.h"
#include "service/internal_auth.h"
#include "tools/local_cluster.h"
#include "worker/worker_runtime.h"

namespace baton::tools {
namespace {

struct ServeFlags {
  worker::WorkerFlags worker;
  router::RouterFlags router;
  int prefill = 0;  // worker processes of a split cluster; 0 and 0: one colocated worker
  int decode = 0;
  // Each pool's group shape; 0: --tensor-parallel-size / --pipeline-parallel-size.
  int prefill_tp = 0, prefill_pp = 0, decode_tp = 0, decode_pp = 0;
};

// Writes `token` to a file only this user can read, in a new private directory, for the
// worker processes to read at start; the caller removes it once they have.
absl::StatusOr<std::filesystem::path> WriteTokenFile(const std::string& token) {
  std::string dir = (std::filesystem::temp_directory_path() / "baton-serve-XXXXXX").string();
  if (mkdtemp(dir.data()) == nullptr) {  // mode 0700
    return absl::InternalError(StrCat("cannot make a private directory in ",
                                      std::filesystem::temp_directory_path().string(),
                                      " for the workers' token; set TMPDIR"));
  }
  const std::filesystem::path path = std::filesystem::path(dir) / "internal-token";
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  const bool written =
      fd >= 0 && write(fd, token.data(), token.size()) == static_cast<ssize_t>(token.size());
  if (fd >= 0) close(fd);
  if (!written) {
    std::filesystem::remove_all(dir);
    return absl::InternalError(StrCat("cannot write the workers' token to ", path.string()));
  }
  return path;
}

// `baton serve --prefill N --decode M`: the workers in their own processes, the router here.
// Unless the user gave a credential, they share a random token that only this process and
// its children ever hold.
absl::Status RunSplit(ServeFlags flags, router::RouterOptions options) {
  const auto or_default = [](int v, int d) { return v > 0 ? v : d; };
  const LocalCluster::Pool prefill{
      flags.prefill, or_default(flags.prefill_tp, flags.worker.tensor_parallel_size),
      or_default(flags.prefill_pp, flags.worker.pipeline_parallel_size)};
  const LocalCluster::Pool decode{flags.decode,
                                  or_default(flags.decode_tp, flags.worker.tensor_parallel_size),
                                  or_default(flags.decode_pp, flags.worker.pipeline_parallel_size)};
  LogInfo(
      "baton serve: starting %d prefill (tp=%d pp=%d) and %d decode (tp=%d pp=%d) "
      "workers for %s",
      prefill.workers, prefill.tensor_parallel, prefill.pipeline_parallel, decode.workers,
      decode.tensor_parallel, decode.pipeline_parallel, flags.worker.model.c_str());
  std::filesystem::path token_file;
  if (options.pool.auth->open()) {
    const std::string token = RandomToken();
    BATON_ASSIGN_OR_RETURN(token_file, WriteTokenFile(token));
    flags.worker.auth.token_file = token_file.string();
    options.pool.auth = service::InternalAuth::WithToken(token);
  }
  // Kept until the end: a worker started again reads it too.
  struct RemoveTokenDir {
    std::filesystem::path file;
    ~RemoveTokenDir() {
      if (!file.empty()) std::filesystem::remove_all(file.parent_path());
    }
  } remove_token_dir{token_file};
  BATON_ASSIGN_OR_RETURN(std::unique_ptr<LocalCluster> cluster,
                         LocalCluster::Start(flags.worker, prefill, decode, absl::Minutes(10)));
  options.worker.clear();
  options.prefill_workers = cluster->prefill_targets();
  options.decode_workers = cluster->decode_targets();
  BATON_ASSIGN_OR_RETURN(auto router, router::RouterServer::Start(options));
  auto& restarts = prometheus::BuildCounter()
                       .Name("baton_serve_worker_restarts_total")
                       .Help("Worker processes of baton serve started again after they exited")
                       .Register(router->metrics().registry());
  // A worker that cannot be started again ends `baton serve` with an error, as a stop
  // signal would end it cleanly.
  static std::mutex give_up_mu;
  static std::string give_up_why;
  cluster->Supervise(
      [&restarts](const std::string& role) {
        restarts.Add({{"role", role}}).Increment();
      },
      [](const std::string& why) {
        {
          std::lock_guard<std::mutex> lock(give_up_mu);
          give_up_why = why;
        }
        kill(getpid(), SIGTERM);
      });
  const std::string metrics = cluster->metrics_banner();
  std::printf(
      "baton serve: serving %s on %s://%s:%d (gRPC %s:%d), prefill workers %s, decode "
      "workers %s%s%s\n",
      router->model().name().c_str(), router->http_scheme(), options.host.c_str(),
      router->http_port(), options.host.c_str(), router->grpc_port(),
      options.prefill_workers.c_str(), options.decode_workers.c_str(), metrics.empty() ? "" : "; ",
      metrics.c_str());
  std::fflush(stdout);
  const int signal = WaitForStopSignal();
  std::string why;
  {
    std::lock_guard<std::mutex> lock(give_up_mu);
    why = give_up_why;
  }
  LogInfo("baton serve: %s, draining", !why.empty()       ? why.c_str()
                                       : signal == SIGINT ? "SIGINT"
                                                          : "SIGTERM");
  // The router drains first: once it has, the workers have nothing left to finish.
  router->Drain(absl::Seconds(flags.router.shutdown_grace_seconds));
  cluster->Stop();
  if (!why.empty()) return absl::UnavailableError(StrCat(why, "; its error is above"));
  return absl::OkStatus();
}

absl::Status Run(ServeFlags flags) {
  BlockStopSignals();
  flags.worker.host = "127.0.0.1";  // the worker is internal: loopback only
  flags.router.model = flags.worker.model;
  flags.router.histogram_buckets = flags.worker.histogram_buckets;
  BATON_ASSIGN_OR_RETURN(router::RouterOptions options, router::ToRouterOptions(flags.router));
  // The router presents what the workers require: the user's files, or (in RunSplit, and
  // below) a token of its own.
  BATON_ASSIGN_OR_RETURN(options.pool.auth, service::InternalAuth::Load(flags.worker.auth));
  // Before any worker starts: a device that cannot run fails here, once, not in each child.
  BATON_RETURN_IF_ERROR(engine::CheckDevice(flags.worker.device));
  if (flags.prefill > 0 || flags.decode > 0) {
    worker::WorkerFlags split = flags.worker;
    split.role = "prefill";
    BATON_RETURN_IF_ERROR(worker::CheckGpuWorker(split));
    return RunSplit(std::move(flags), std::move(options));
  }
  LogInfo("baton serve: loading %s", flags.worker.model.c_str());
  if (options.pool.auth->open())
    options.pool.auth = service::InternalAuth::WithToken(RandomToken());
  BATON_ASSIGN_OR_RETURN(std::unique_ptr<worker::WorkerRuntime> worker,
                         worker::WorkerRuntime::Start(flags.worker, options.pool.auth));
  options.worker = StrCat("127.0.0.1:", worker->port());
  BATON_ASSIGN_OR_RETURN(auto router, router::RouterServer::Start(options));
  // The first stdout line says where it listens (scripts and tests read the ports here).
  std::printf("baton serve: serving %s on %s://%s:%d (gRPC %s:%d), worker 127.0.0.1:%d",
              router->model().name().c_str(), router->http_scheme(), options.host.c_str(),
              router->http_port(), options.host.c_str(), router->grpc_port(), worker->port());
  if (worker->metrics_port() >= 0) {
    std::printf("; worker metrics http://127.0.0.1:%d/metrics", worker->metrics_port());
  }
  std::printf("\n");
  std::fflush(stdout);
  const int signal = WaitForStopSignal();
  LogInfo("baton serve: %s, draining", signal == SIGINT ? "SIGINT" : "SIGTERM");
  router->Drain(absl::Seconds(flags.router.shutdown_grace_seconds));
  worker->Shutdown(absl::Seconds(1));
  return absl::OkStatus();
}

}  // namespace

void AddServeCommand(CLI::App& app) {
  auto f = std::make_shared<ServeFlags>();
  f->worker.port = 0;
  // The bundled model beside the binary (common/install_paths.h), named in --help.
  f->worker.model = DefaultModelPath();
  CLI::App* cmd = app.add_subcommand(
      "serve", "Serve a model locally: OpenAI-compatible HTTP and gRPC, until Ctrl-C");
  cmd->add_option("model,--model", f->worker.model,
                  StrCat("A .gguf file or a Hugging Face model directory (default: the bundled "
                         "model, ",
                         f->worker.model, ")"))
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
  service::AddInternalAuthFlags(cmd, &f->worker.auth, /*serves=*/true);
  const struct {
    const char* flag;
    const char* env;
    int* value;
    const char* help;
  } pools[] = {
      {"--prefill-tensor-parallel-size", "BATON_PREFILL_TENSOR_PARALLEL_SIZE", &f->prefill_tp,
       "Tensor-parallel ranks of each prefill worker (default: --tensor-parallel-size)"},
      {"--prefill-pipeline-parallel-size", "BATON_PREFILL_PIPELINE_PARALLEL_SIZE", &f->prefill_pp,
       "Pipeline stages of each prefill worker (default: --pipeline-parallel-size)"},
      {"--decode-tensor-parallel-size", "BATON_DECODE_TENSOR_PARALLEL_SIZE", &f->decode_tp,
       "Tensor-parallel ranks of each decode worker (default: --tensor-parallel-size)"},
      {"--decode-pipeline-parallel-size", "BATON_DECODE_PIPELINE_PARALLEL_SIZE", &f->decode_pp,
       "Pipeline stages of each decode worker (default: --pipeline-parallel-size)"},
  };
  for (const auto& p : pools) {
    cmd->add_option(p.flag, *p.value, p.help)->envname(p.env)->check(CLI::Range(0, 64));
  }
  cmd->callback([f] {
    absl::Status status = Run(*f);
    if (!status.ok()) {
      std::cerr << "baton serve: " << status.message() << "\n";
      throw CLI::RuntimeError(1);
    }
  });
}

}  // namespace baton::tools
