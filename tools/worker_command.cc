#include "tools/worker_command.h"

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "common/status.h"
#include "common/strings.h"
#include "engine/engine.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "worker/worker_service.h"

namespace baton::tools {
namespace {

struct WorkerFlags {
  std::string model;
  std::string host = "127.0.0.1";
  int port = 50061;
  int threads = 0;
  std::string kv_cache_memory;  // bytes with an optional KiB/MiB/GiB suffix
  double kv_cache_fraction = 0.25;
  int64_t block_size = 16;
  int64_t max_running = 256;
  int64_t max_waiting = 4096;
  int64_t max_batched_tokens = 2048;
  int64_t max_prefill_chunk = 512;
  bool no_prefix_cache = false;
  bool no_mmap = false;
};

// "1073741824", "512MiB", "4GiB", "64KiB" -> bytes.
absl::StatusOr<int64_t> ParseBytes(const std::string& text, std::string_view flag) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  const std::string suffix = text.substr(digits);
  int shift = -1;
  if (suffix.empty() || suffix == "B") shift = 0;
  if (suffix == "KiB") shift = 10;
  if (suffix == "MiB") shift = 20;
  if (suffix == "GiB") shift = 30;
  if (digits == 0 || digits > 12 || shift < 0) {
    return absl::InvalidArgumentError(StrCat(flag, " '", text,
                                             "' is not a size; give bytes, or a number with "
                                             "KiB, MiB or GiB (e.g. 4GiB)"));
  }
  return static_cast<int64_t>(std::stoll(text.substr(0, digits))) << shift;
}

absl::Status Run(const WorkerFlags& flags) {
  // Block the stop signals before any thread starts, so that only sigwait sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  engine::EngineOptions options;
  options.threads = flags.threads;
  options.block_size = flags.block_size;
  options.kv_cache_fraction = flags.kv_cache_fraction;
  if (!flags.kv_cache_memory.empty()) {
    BATON_ASSIGN_OR_RETURN(options.kv_cache_bytes,
                           ParseBytes(flags.kv_cache_memory, "--kv-cache-memory"));
  }
  options.enable_prefix_cache = !flags.no_prefix_cache;
  options.max_running = flags.max_running;
  options.max_waiting = flags.max_waiting;
  options.max_batched_tokens = flags.max_batched_tokens;
  options.max_prefill_chunk = flags.max_prefill_chunk;

  model::OpenOptions open;
  open.use_mmap = !flags.no_mmap;
  BATON_ASSIGN_OR_RETURN(engine::LoadedModel loaded, engine::LoadModel(flags.model, open));
  BATON_ASSIGN_OR_RETURN(std::unique_ptr<engine::Engine> engine,
                         engine::Engine::Create(&loaded, options));
  worker::WorkerService service(engine.get());

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  const std::string address = StrCat(flags.host, ":", flags.port);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(service.worker());
  builder.RegisterService(service.kv_events());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return absl::UnavailableError(
        StrCat("cannot listen on ", address, "; is the port in use? Pick another with --port"));
  }
  // The first stdout line says where it listens: scripts and tests read the port here
  // (with --port 0 the system picks one).
  std::printf("baton worker: serving %s on %s:%d (%lld KV pages of %lld tokens)\n",
              loaded.name.c_str(), flags.host.c_str(), port,
              static_cast<long long>(engine->num_kv_pages()),
              static_cast<long long>(flags.block_size));
  std::fflush(stdout);

  int signal = 0;
  sigwait(&stop_signals, &signal);
  std::fprintf(stderr, "baton worker: %s, stopping\n", signal == SIGINT ? "SIGINT" : "SIGTERM");
  // Open calls get a second to finish; then gRPC cancels them, which cancels their
  // requests in the engine. (With a client still connected, gRPC 1.51's sync server
  // always waits out this deadline.)
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server.reset();
  engine.reset();  // ends whatever is still open
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
  cmd->add_option("--threads", f->threads, "Compute threads (0: one per core)")
      ->envname("BATON_THREADS");
  cmd->add_option("--kv-cache-memory", f->kv_cache_memory,
                  "KV cache size, e.g. 4GiB (default: --kv-cache-fraction of free memory)")
      ->envname("BATON_KV_CACHE_MEMORY");
  cmd->add_option("--kv-cache-fraction", f->kv_cache_fraction,
                  "Fraction of available memory for the KV cache when no size is given");
  cmd->add_option("--block-size", f->block_size, "Tokens per KV page");
  cmd->add_option("--max-running", f->max_running, "Sequences decoding together");
  cmd->add_option("--max-waiting", f->max_waiting,
                  "Queued requests before new ones get RESOURCE_EXHAUSTED");
  cmd->add_option("--max-batched-tokens", f->max_batched_tokens, "Tokens per engine step");
  cmd->add_option("--max-prefill-chunk", f->max_prefill_chunk,
                  "Prompt tokens per sequence per step");
  cmd->add_flag("--no-prefix-cache", f->no_prefix_cache, "Do not reuse cached prompt blocks");
  cmd->add_flag("--no-mmap", f->no_mmap,
                "Copy the weights into (huge-page) memory instead of mapping the file");
  cmd->callback([f] {
    absl::Status status = Run(*f);
    if (!status.ok()) {
      std::cerr << "baton worker: " << status.message() << "\n";
      throw CLI::RuntimeError(1);
    }
  });
}

}  // namespace baton::tools
