// One model's engine served over the internal gRPC API (baton.internal.v1.Worker and
// KvEvents, grpc.health.v1, reflection): what `baton worker` runs, and what `baton serve`
// runs beside its router in the same process.
#pragma once

#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/engine.h"
#include "engine/loaded_model.h"
#include "grpcpp/grpcpp.h"
#include "worker/worker_service.h"

namespace baton::tools {

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

// The engine flags (--threads, --kv-cache-memory, ..., --no-mmap); not --model, --host or
// --port, which each command defines with its own meaning.
void AddEngineFlags(CLI::App* cmd, WorkerFlags* flags);

class WorkerRuntime {
 public:
  // Loads the model, starts the engine and the gRPC server on flags.host:flags.port.
  static absl::StatusOr<std::unique_ptr<WorkerRuntime>> Start(const WorkerFlags& flags);
  ~WorkerRuntime();

  int port() const { return port_; }
  const engine::LoadedModel& model() const { return loaded_; }
  engine::Engine& engine() { return *engine_; }

  // Open calls get `grace`; then gRPC cancels them, which cancels them in the engine.
  void Shutdown(absl::Duration grace);

 private:
  WorkerRuntime() = default;

  engine::LoadedModel loaded_;
  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<worker::WorkerService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace baton::tools
