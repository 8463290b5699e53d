// One model's engine served over the internal gRPC API (baton.internal.v1.Worker,
// KvEvents and, for the roles that receive KV transfers, KvTransfer; grpc.health.v1;
// reflection): what `baton worker`, `baton-prefill` and `baton-decode` run, and what
// `baton serve` runs beside its router in the same process.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/shutdown_grace.h"
#include "engine/device.h"
#include "engine/engine.h"
#include "engine/gpu_backend.h"
#include "engine/loaded_model.h"
#include "grpcpp/grpcpp.h"
#include "parallel/tcp_store.h"
#include "service/health_service.h"
#include "service/http_server.h"
#include "service/internal_auth.h"
#include "transport/registered_region.h"
#include "transport/ucx_worker.h"
#include "worker/group_ranks.h"
#include "worker/kv_receiver.h"
#include "worker/kv_sender.h"
#include "worker/worker_metrics.h"
#include "worker/worker_service.h"

namespace baton::worker {

struct WorkerFlags {
  std::string model;
  std::string host = "127.0.0.1";
  int port = 50061;
  int threads = 0;
  engine::DeviceOptions device;  // --device, --device-id
  std::string kv_cache_memory;   // bytes with an optional KiB/MiB/GiB suffix
  double kv_cache_fraction = 0.25;
  std::string kv_cache_dtype = "bf16";  // --kv-cache-dtype: EngineOptions::kv_cache_dtype
  int64_t block_size = 16;
  int64_t max_running = 256;
  int64_t max_waiting = 4096;
  int64_t max_batched_tokens = 2048;
  int64_t max_prefill_chunk = 512;
  int64_t max_model_len = 0;  // 0: the model's max_position_embeddings
  bool no_prefix_cache = false;
  bool no_mmap = false;
  std::string quant_activations = "int8";  // --quant-activations: OpenOptions::int8_activations
  double shutdown_grace_seconds = kDefaultShutdownGraceSeconds;  // `baton worker`, baton-*
  bool check_weights = false;  // --check-weights: refuse a model with a NaN or Inf weight
  // Disaggregation (docs/disaggregation.md): "colocated" (prefill and decode in one
  // process, no KV transfers), "prefill" or "decode".
  std::string role = "colocated";
  std::string ucx_tls;  // UCX transports; empty: UCX_TLS, else UCX's choice
  // The address whose interface UCX's network transports listen on; empty: --host.
  std::string transfer_host;
  // Where the KV pool's memory comes from: "auto" (UCX allocates it on a decode worker
  // whose transports include shared memory), "engine" or "ucx".
  std::string kv_pool = "auto";
  int debug_step_delay_ms = 0;   // tests only (EngineOptions::debug_step_delay)
  double kv_lease_seconds = 60;  // decode side: a reservation's default lease
  // Decode side: the share of the KV pool (and of the leases) one caller may hold reserved.
  double max_reserved_share_per_caller = 0.5;
  int metrics_port = 0;  // Prometheus /metrics on host:port; 0: any free port, -1: none
  std::vector<std::string> histogram_buckets;  // --histogram-buckets NAME=v1,v2,...
  // A worker group (docs/parallel.md): tp x pp ranks serving as one worker. Rank 0 (the
  // leader) runs the engine and this API; on one host it starts the other ranks itself,
  // as child processes that meet it through a private rendezvous directory.
  int tensor_parallel_size = 1;
  int pipeline_parallel_size = 1;
  int group_rank = 0;
  std::string group_store;  // the rendezvous directory; set by the leader for its ranks
  // Ranks on several hosts (docs/parallel.md): each is started by the operator with its
  // --group-rank; they meet at rank 0's --group-leader HOST:PORT, which serves the
  // rendezvous to callers holding the token in --internal-token-file.
  int group_size_flag = 0;  // --group-size: 0, or tp x pp said again
  std::string group_leader;
  // Who may call this worker (service/internal_auth.h): --internal-token-file, mTLS.
  service::InternalAuthFlags auth;
  int group_timeout_ms = 10000;
  int pp_micro_batches = 0;  // 0: 2 x pipeline-parallel-size
  int ready_fd = -1;         // a started rank writes its first line here too
  // How a leader starts its ranks: `/proc/self/exe` with these words before their flags
  // ("worker" for `baton`; none for the role binaries, whose role is fixed).
  std::vector<std::string> rank_command = {"worker"};
  int group_size() const { return tensor_parallel_size * pipeline_parallel_size; }
};

// The worker-group flags (--tensor-parallel-size/--tp, --pipeline-parallel-size/--pp,
// --group-timeout-ms, and the hidden ones a leader gives its ranks).
void AddGroupFlags(CLI::App* cmd, WorkerFlags* flags);

// --device and --device-id, with their BATON_* variables (every binary that runs the engine).
void AddDeviceFlags(CLI::App* cmd, engine::DeviceOptions* device);
// What the GPU backend does not run yet, refused before anything loads: worker groups and
// the prefill and decode roles (KV transfers of GPU pages). OK for --device cpu.
absl::Status CheckGpuWorker(const WorkerFlags& flags);
// The device flags again, for a child process; its GPU is `device_offset` past ours.
std::vector<std::string> DeviceArgs(const engine::DeviceOptions& device, int device_offset = 0);

// --kv-cache-dtype bf16|f32 (BATON_KV_CACHE_DTYPE; every binary that runs the engine).
void AddKvCacheDtypeFlag(CLI::App* cmd, std::string* dtype);
// --quant-activations f32|int8 (BATON_QUANT_ACTIVATIONS): model::OpenOptions::int8_activations.
void AddQuantActivationsFlag(CLI::App* cmd, std::string* mode);

// The engine flags (--device, --threads, --kv-cache-memory, ..., --no-mmap); not --model, --host or
// --port, which each command defines with its own meaning.
void AddEngineFlags(CLI::App* cmd, WorkerFlags* flags);
// The KV-transfer flags (--ucx-tls, --kv-lease-seconds), --metrics-port and
// --histogram-buckets.
void AddTransferFlags(CLI::App* cmd, WorkerFlags* flags);

// The UCX options of a worker that takes part in KV transfers: --ucx-tls, and network
// devices limited to the interface of --transfer-host (or --host).
absl::StatusOr<transport::UcxOptions> TransferUcxOptions(const WorkerFlags& flags);

class WorkerRuntime {
 public:
  // Loads the model, starts the engine and the gRPC server on flags.host:flags.port.
  // `auth` is who may call it; null: what flags.auth names.
  static absl::StatusOr<std::unique_ptr<WorkerRuntime>> Start(
      const WorkerFlags& flags, std::shared_ptr<const service::InternalAuth> auth = nullptr);
  ~WorkerRuntime();

  int port() const { return port_; }
  int metrics_port() const;  // -1 with --metrics-port -1
  const std::string& role() const { return role_; }
  const engine::LoadedModel& model() const { return loaded_; }
  engine::Engine& engine() { return *engine_; }

  // The drain on SIGTERM (worker/worker_drain.h): health NOT_SERVING and new calls
  // refused at once; calls in flight get up to `grace` to finish; those left are then
  // cancelled and end UNAVAILABLE (the router migrates their streams), with `last_words`
  // to say so before Shutdown.
  void Drain(absl::Duration grace, absl::Duration last_words = absl::Seconds(1));

  // Open calls get `grace`; then gRPC cancels them, which cancels them in the engine.
  void Shutdown(absl::Duration grace);

 private:
  WorkerRuntime() = default;

  std::string role_;
  engine::LoadedModel loaded_;
  std::unique_ptr<engine::GpuEngine> gpu_;  // --device cuda: outlives the engine, its pages
  std::unique_ptr<engine::Engine> engine_;
  WorkerMetrics metrics_;
  std::unique_ptr<transport::UcxWorker> ucx_;
  std::unique_ptr<transport::RegisteredRegion> pool_region_;
  bool pool_from_ucx_ = false;  // UCX allocated the engine's KV pool (pool_region_ owns it)
  std::unique_ptr<KvReceiver> receiver_;
  std::unique_ptr<KvSender> sender_;
  engine::GroupBackend* group_backend_ = nullptr;  // a group leader's; the engine owns it
  std::unique_ptr<WorkerService> service_;
  std::unique_ptr<service::HttpServer> metrics_http_;
  std::unique_ptr<service::HealthService> health_;  // outlives server_
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::unique_ptr<GroupRanks> group_;                      // the other ranks of this leader's group
  std::unique_ptr<parallel::TcpStoreServer> group_store_;  // a multi-host group's rendezvous
  std::thread health_watch_;                               // NOT_SERVING once the group breaks
  std::atomic<bool> stopping_{false};
};

}  // namespace baton::worker
