#include "worker/worker_runtime.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <utility>

#include "common/host_port.h"
#include "common/log.h"
#include "common/status.h"
#include "common/strings.h"
#include "engine/parallel/worker_group.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "model/load_progress.h"
#include "model/weight_check.h"
#include "model/weight_types.h"
#include "parallel/store.h"
#include "service/metrics.h"
#include "transport/net_devices.h"
#include "worker/rank_kv.h"

namespace baton::worker {
namespace {

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

// What the loaded model leaves for requests, once: how many sequences of the longest
// allowed length fit at once tells an operator whether --max-model-len and the KV budget
// suit the load.
void LogCapacity(const engine::LoadedModel& loaded, const engine::Engine& engine) {
  const int64_t pages = engine.num_kv_pages();
  const int64_t block = engine.scheduler_config().block_size;
  const int64_t tokens = pages * block;
  const int64_t max_len = engine.scheduler_config().max_model_len;
  // A sequence holds whole pages: max_len tokens take ceil(max_len / block) of them.
  const int64_t pages_per_sequence = (max_len + block - 1) / block;
  LogInfo(
      "%s ready: weights %.1f MiB (%s); KV cache %lld pages of %lld tokens (%.1f "
      "MiB) = %lld tokens; %lld sequences of max-model-len %lld fit",
      loaded.name, static_cast<double>(loaded.model->weight_bytes()) / (1 << 20),
      model::MatrixTypeSummary(loaded.model->weights()).c_str(), static_cast<long long>(pages),
      static_cast<long long>(block),
      static_cast<double>(pages * engine.kv_layout().page_bytes()) / (1 << 20),
      static_cast<long long>(tokens), static_cast<long long>(pages / pages_per_sequence),
      static_cast<long long>(max_len));
}

}  // namespace

void AddDeviceFlags(CLI::App* cmd, engine::DeviceOptions* d) {
  cmd->add_option("--device", d->device,
                  "Where the forward runs: cpu, or cuda (a GPU, --device-id)")
      ->envname("BATON_DEVICE")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  cmd->add_option("--device-id", d->device_id,
                  "cuda: the first GPU, among those CUDA_VISIBLE_DEVICES leaves; a group's rank r "
                  "takes the one r after it")
      ->envname("BATON_DEVICE_ID")
      ->check(CLI::Range(0, 1023))
      ->capture_default_str();
  cmd->add_flag("--batch-invariant", d->batch_invariant,
                "cuda: GEMM algorithms that never depend on the batch, so that a sequence's "
                "logits are the same bits whatever runs beside it (the CPU always is); costs "
                "some speed (docs/perf/gpu.md)")
      ->envname("BATON_BATCH_INVARIANT");
  cmd->add_flag("--enforce-eager", d->enforce_eager,
                "cuda: run every step eagerly, without CUDA graphs")
      ->envname("BATON_ENFORCE_EAGER");
  cmd->add_option("--gpu-memory-utilization", d->gpu_memory_utilization,
                  "cuda: share of the device memory left after the weights that goes to KV "
                  "pages, unless --kv-cache-memory gives a size")
      ->envname("BATON_GPU_MEMORY_UTILIZATION")
      ->check(CLI::Range(0.01, 0.98))
      ->capture_default_str();
}

std::vector<std::string> DeviceArgs(const engine::DeviceOptions& d, int device_offset) {
  std::vector<std::string> a = {"--device",
                                d.device,
                                "--device-id",
                                StrCat(d.device_id + device_offset),
                                "--gpu-memory-utilization",
                                StrCat(d.gpu_memory_utilization)};
  if (d.batch_invariant) a.emplace_back("--batch-invariant");
  if (d.enforce_eager) a.emplace_back("--enforce-eager");
  return a;
}

void AddKvCacheDtypeFlag(CLI::App* cmd, std::string* dtype) {
  cmd->add_option("--kv-cache-dtype", *dtype,
                  "Element type of the KV cache: bf16 (half the memory; what GPU workers hold, "
                  "so CPU and GPU workers can exchange pages) or f32 (exact). Prefill and decode "
                  "workers must agree; a group's ranks take their leader's")
      ->envname("BATON_KV_CACHE_DTYPE")
      ->check(CLI::IsMember({"bf16", "f32"}))
      ->capture_default_str();
}

void AddQuantActivationsFlag(CLI::App* cmd, std::string* mode) {
  cmd->add_option("--quant-activations", *mode,
                  "How quantized weights meet activations: int8 (activations rounded to 8-bit "
                  "blocks and multiplied as integers, llama.cpp's numerics; the fast path) or "
                  "f32 (the weights widened to f32, exact against the dequantized model). "
                  "Q2_K, Q3_K and unquantized weights always take the f32 path")
      ->envname("BATON_QUANT_ACTIVATIONS")
      ->check(CLI::IsMember({"f32", "int8"}))
      ->capture_default_str();
}

void AddEngineFlags(CLI::App* cmd, WorkerFlags* f) {
  AddDeviceFlags(cmd, &f->device);
  AddKvCacheDtypeFlag(cmd, &f->kv_cache_dtype);
  cmd->add_option("--threads", f->threads, "Compute threads (0: one per core)")
      ->envname("BATON_THREADS");
  cmd->add_option("--kv-cache-memory", f->kv_cache_memory,
                  "KV cache size, e.g. 4GiB (default: --kv-cache-fraction of free memory)")
      ->envname("BATON_KV_CACHE_MEMORY");
  cmd->add_option("--kv-cache-fraction", f->kv_cache_fraction,
                  "Fraction of available memory for the KV cache when no size is given");
  cmd->add_option("--block-size", f->block_size, "Tokens per KV page");
  cmd->add_option("--max-running,--max-num-seqs", f->max_running, "Sequences decoding together");
  cmd->add_option("--max-waiting", f->max_waiting,
                  "Queued requests before new ones get RESOURCE_EXHAUSTED");
  cmd->add_option("--max-batched-tokens,--max-num-batched-tokens", f->max_batched_tokens,
                  "Tokens per engine step");
  cmd->add_option("--max-prefill-chunk", f->max_prefill_chunk,
                  "Prompt tokens per sequence per step");
  cmd->add_option("--max-model-len", f->max_model_len,
                  "Prompt plus output tokens per sequence (0: the model's context length)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  cmd->add_flag("--no-prefix-cache", f->no_prefix_cache, "Do not reuse cached prompt blocks");
  // Hidden (no group): for tests that must interrupt a prompt midway.
  cmd->add_option("--debug-step-delay-ms", f->debug_step_delay_ms)
      ->group("")
      ->check(CLI::Range(0, 10000));
  cmd->add_flag("--no-mmap", f->no_mmap,
                "Copy the weights into (huge-page) memory instead of mapping the file");
  AddQuantActivationsFlag(cmd, &f->quant_activations);
  cmd->add_flag("--check-weights", f->check_weights,
                "Scan every weight for NaN and Inf after loading and refuse the model if one "
                "has any (one extra pass over the weights)")
      ->envname("BATON_CHECK_WEIGHTS");
}

absl::StatusOr<transport::UcxOptions> TransferUcxOptions(const WorkerFlags& flags) {
  transport::UcxOptions o;
  o.transports = flags.ucx_tls;
  const bool own = !flags.transfer_host.empty();
  BATON_ASSIGN_OR_RETURN(o.net_devices,
                         transport::NetDevicesFor(own ? flags.transfer_host : flags.host,
                                                  own ? "--transfer-host" : "--host"));
  return o;
}

void AddTransferFlags(CLI::App* cmd, WorkerFlags* f) {
  cmd->add_option("--ucx-tls", f->ucx_tls,
                  "UCX transports for KV transfers, as UCX_TLS (e.g. tcp, sm, rc,cuda_ipc)")
      ->envname("BATON_UCX_TLS");
  cmd->add_option("--transfer-host", f->transfer_host,
                  "Address whose network interface UCX's transports for KV transfers listen "
                  "on (default: --host; 0.0.0.0: every interface; UCX_NET_DEVICES, when set, "
                  "wins)")
      ->envname("BATON_TRANSFER_HOST");
  cmd->add_option("--kv-pool", f->kv_pool,
                  "Where the KV pool's memory comes from: auto (a decode worker whose UCX "
                  "transports include shared memory lets UCX allocate it, so that prefill "
                  "workers' puts land in it directly), engine (the engine's own mapping, with "
                  "transparent huge pages), or ucx")
      ->envname("BATON_KV_POOL")
      ->check(CLI::IsMember({"auto", "engine", "ucx"}));
  cmd->add_option("--kv-lease-seconds", f->kv_lease_seconds,
                  "Decode side: how long reserved KV pages wait for their transfer")
      ->envname("BATON_KV_LEASE_SECONDS")
      ->check(CLI::Range(0.1, 600.0));
  cmd->add_option("--max-reserved-share-per-caller", f->max_reserved_share_per_caller,
                  "Decode side: the share of the KV pool's pages, and of its 4096 leases, that "
                  "one caller (a prefill worker, told apart by its IP address and, under "
                  "mutual TLS, its certificate) may hold reserved at once; 1: no bound per "
                  "caller")
      ->envname("BATON_MAX_RESERVED_SHARE_PER_CALLER")
      ->check(CLI::Range(0.01, 1.0));
  cmd->add_option("--metrics-port", f->metrics_port,
                  "Serve Prometheus /metrics on this port (0, the default: any free port, "
                  "printed in the banner; -1: none)")
      ->envname("BATON_METRICS_PORT")
      ->check(CLI::Range(-1, 65535));
  cmd->add_option("--histogram-buckets", f->histogram_buckets,
                  "NAME=v1,v2,...: the upper bounds of the histogram baton_NAME instead of "
                  "vLLM's defaults (repeatable; docs/operations.md lists the names)")
      ->envname("BATON_HISTOGRAM_BUCKETS")
      ->delimiter(' ');
}

void AddGroupFlags(CLI::App* cmd, WorkerFlags* f) {
  cmd->add_option("--tensor-parallel-size,--tp", f->tensor_parallel_size,
                  "Tensor-parallel ranks: each holds a slice of every layer's heads and MLP "
                  "(must divide the attention heads, and divide or be a multiple of the KV "
                  "heads)")
      ->envname("BATON_TENSOR_PARALLEL_SIZE")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--pipeline-parallel-size,--pp", f->pipeline_parallel_size,
                  "Pipeline stages: each holds a contiguous run of layers")
      ->envname("BATON_PIPELINE_PARALLEL_SIZE")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--group-timeout-ms", f->group_timeout_ms,
                  "A worker group's bound on every collective: a rank that dies or hangs fails "
                  "the group within this time (a step of one stage must take less)")
      ->envname("BATON_GROUP_TIMEOUT_MS")
      ->check(CLI::Range(100, 600000));
  cmd->add_option("--pp-micro-batches", f->pp_micro_batches,
                  "Pipeline micro-batches per step (0: twice the stages)")
      ->envname("BATON_PP_MICRO_BATCHES")
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--group-rank", f->group_rank,
                  "This process's rank in a group spread over hosts (0: the leader, which "
                  "serves the worker API); on one host the leader starts its ranks itself")
      ->envname("BATON_GROUP_RANK")
      ->check(CLI::Range(0, 4095));
  cmd->add_option("--group-size", f->group_size_flag,
                  "Ranks in the group: tensor x pipeline parallel size (checked when given)")
      ->envname("BATON_GROUP_SIZE")
      ->check(CLI::Range(0, 4096));
  cmd->add_option("--group-leader", f->group_leader,
                  "HOST:PORT where rank 0 serves the group's rendezvous (a multi-host group); "
                  "every rank gives the same")
      ->envname("BATON_GROUP_LEADER");
  // Set by a leader for the ranks it starts.
  cmd->add_option("--group-store", f->group_store)->group("");
  cmd->add_option("--ready-fd", f->ready_fd)->group("");
}

int WorkerRuntime::metrics_port() const {
  return metrics_http_ == nullptr ? -1 : metrics_http_->port();
}

absl::Status CheckGpuWorker(const WorkerFlags& flags) {
  if (flags.device.device != "cuda") return absl::OkStatus();
  if (flags.group_size() > 1) {
    return absl::UnimplementedError(
        "--device cuda with --tensor-parallel-size or --pipeline-parallel-size above 1: worker "
        "groups on the GPU backend are not built yet (docs/gpu.md); run one GPU per worker");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<WorkerRuntime>> WorkerRuntime::Start(
    const WorkerFlags& flags, std::shared_ptr<const service::InternalAuth> auth) {
  if (auth == nullptr) {
    BATON_ASSIGN_OR_RETURN(auth, service::InternalAuth::Load(flags.auth));
  }
  BATON_RETURN_IF_ERROR(auth->CheckListen(flags.host, flags.auth.allow_open, "this worker"));
  if (flags.role != "colocated" && flags.role != "prefill" && flags.role != "decode") {
    return absl::InvalidArgumentError(
        StrCat("--role is '", flags.role, "'; it must be colocated, prefill or decode"));
  }
  const int group_size = flags.group_size();
  BATON_RETURN_IF_ERROR(CheckGroupFlags(flags));
  BATON_RETURN_IF_ERROR(engine::CheckDevice(flags.device));
  if (flags.group_rank > 0) {
    return absl::InvalidArgumentError(StrCat("--group-rank ", flags.group_rank,
                                             " runs as `baton worker`: only rank 0 serves here"));
  }
  BATON_RETURN_IF_ERROR(CheckGpuWorker(flags));
  const bool on_gpu = flags.device.device == "cuda";
  std::unique_ptr<WorkerRuntime> w(new WorkerRuntime());
  w->role_ = flags.role;
  engine::EngineOptions options;
  options.threads = flags.threads;
  if (group_size > 1 && options.threads == 0) {
    // The ranks share this host: each gets its share of the cores.
    options.threads = std::max(1, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)) / group_size);
  }
  options.block_size = flags.block_size;
  BATON_RETURN_IF_ERROR(kvcache::CheckKvCacheDtype(flags.kv_cache_dtype));
  options.kv_cache_dtype = flags.kv_cache_dtype;
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
  options.max_model_len = flags.max_model_len;
  options.debug_step_delay = std::chrono::milliseconds(flags.debug_step_delay_ms);
  BATON_ASSIGN_OR_RETURN(const service::HistogramBuckets buckets,
                         service::HistogramBuckets::Parse(flags.histogram_buckets));
  // SetModel runs once the engine exists and before any request can reach it (the gRPC
  // server starts later), so the hooks always find the series.
  options.on_step = [self = w.get()](int64_t tokens) { self->metrics_.ObserveStep(tokens); };
  options.on_request_end = [self = w.get()](const engine::TokenEvent& last) {
    self->metrics_.ObserveRequestEnd(last);
  };

  model::OpenOptions open;
  open.use_mmap = !flags.no_mmap;
  open.int8_activations = flags.quant_activations == "int8";
  open.progress = model::LogLoadProgress(flags.model);
  // Only prefill and decode workers take part in KV transfers: a colocated worker opens no
  // UCX listener at all (the router never pairs it with a prefill worker), unless its pool
  // is to come from UCX.
  if (flags.role != "colocated" || flags.kv_pool == "ucx") {
    BATON_ASSIGN_OR_RETURN(const transport::UcxOptions ucx, TransferUcxOptions(flags));
    BATON_ASSIGN_OR_RETURN(w->ucx_, transport::UcxWorker::Create(ucx));
  }
  // A decode worker's pool is where prefill workers' puts land. Over shared memory UCX
  // can write only into memory it allocated itself without emulating the put (a copy
  // into a bounce buffer, then one by our progress thread): docs/transport.md. Other
  // roles keep the engine's own mapping, which gets transparent huge pages.
  if (flags.kv_pool != "auto" && flags.kv_pool != "engine" && flags.kv_pool != "ucx") {
    return absl::InvalidArgumentError(
        StrCat("--kv-pool is '", flags.kv_pool, "'; it must be auto, engine or ucx"));
  }
  // A GPU worker's pages are the device's: what transfers touch is their host copy
  // (engine/kv_host_mirror.h), which a prefill or decode worker keeps; a colocated GPU
  // worker takes no part in transfers.
  engine::GpuStart gpu_start;
  gpu_start.host_mirror = on_gpu && flags.role != "colocated";
  if (flags.kv_pool == "ucx" || (flags.kv_pool == "auto" && flags.role == "decode" &&
                                 transport::MayUseSharedMemory(flags.ucx_tls))) {
    WorkerRuntime* self = w.get();
    auto& pool_memory = on_gpu ? gpu_start.host_mirror_memory : options.kv_pool_memory;
    pool_memory = [self](size_t bytes) -> absl::StatusOr<void*> {
      absl::StatusOr<std::unique_ptr<transport::RegisteredRegion>> region =
          transport::RegisteredRegion::Allocate(*self->ucx_, bytes);
      if (!region.ok()) {
        LogWarn("baton worker: UCX could not allocate the KV pool (%s); mapping it",
                std::string(region.status().message()).c_str());
        return nullptr;  // the engine maps its own
      }
      self->pool_region_ = *std::move(region);
      self->pool_from_ucx_ = true;
      return self->pool_region_->data();
    };
  }
  engine::GroupOptions group;
  std::unique_ptr<parallel::FileStore> store;
  if (group_size > 1) {
    // The ranks share this host's memory: the KV budget by fraction is the group's. An
    // explicit --kv-cache-memory is each rank's.
    options.kv_cache_fraction = flags.kv_cache_fraction / group_size;
    group.tp_size = flags.tensor_parallel_size;
    group.pp_size = flags.pipeline_parallel_size;
    group.rank = 0;
    group.address = flags.host;
    group.timeout = std::chrono::milliseconds(flags.group_timeout_ms);
    group.micro_batches = flags.pp_micro_batches;
  }
  // The engine keeps a pointer to the model: it is loaded into its final place first.
  BATON_ASSIGN_OR_RETURN(w->loaded_,
                         engine::LoadModel(flags.model, open, engine::PlacementOf(group)));
  if (flags.check_weights) BATON_RETURN_IF_ERROR(model::CheckWeightsFinite(*w->loaded_.model));
  if (group_size > 1) {
    if (flags.group_leader.empty()) {
      // The leader's shard is loaded first: a placement the model cannot take is refused
      // before any rank starts.
      BATON_ASSIGN_OR_RETURN(w->group_, GroupRanks::Start(flags, options.threads));
      store = std::make_unique<parallel::FileStore>(w->group_->store_dir());
      group.store = store.get();
    } else {
      BATON_ASSIGN_OR_RETURN(w->group_store_, ServeGroupRendezvous(flags, &group));
      group.store = w->group_store_.get();
    }
    BATON_ASSIGN_OR_RETURN(
        options.shard, model::PlanShard(w->loaded_.model->config(), engine::PlacementOf(group)));
    BATON_ASSIGN_OR_RETURN(engine::GroupComms comms, engine::ConnectGroup(group));
    engine::RankKvSetup kv;
    if (flags.role != "colocated") {
      // The leader's own slice of transfers, over its pool (registered here, unless UCX
      // allocated it).
      WorkerRuntime* self = w.get();
      kv.make = [self](kvcache::KvPool* pool) -> absl::StatusOr<std::unique_ptr<engine::RankKv>> {
        if (self->pool_region_ == nullptr) {
          BATON_ASSIGN_OR_RETURN(
              self->pool_region_,
              transport::RegisteredRegion::Register(
                  *self->ucx_, pool->block_data(0),
                  static_cast<size_t>(pool->layout().page_bytes() * pool->num_blocks())));
        }
        return std::unique_ptr<engine::RankKv>(std::make_unique<UcxRankKv>(
            self->ucx_.get(), self->pool_region_.get(), pool, 0, KvSenderOptions{}.flush_timeout));
      };
    }
    options.backend = engine::MakeGroupBackendFactory(
        w->loaded_.model.get(), group, std::make_shared<engine::GroupComms>(std::move(comms)), kv,
        [self = w.get()](engine::GroupBackend* b) { self->group_backend_ = b; });
  }
  BATON_ASSIGN_OR_RETURN(w->gpu_,
                         engine::StartGpu(*w->loaded_.model, flags.device, &options, gpu_start));
  BATON_ASSIGN_OR_RETURN(w->engine_, engine::Engine::Create(&w->loaded_, options));
  // The model name a router serves by default (GetModelInfo's model_id).
  w->metrics_.SetModel(
      w->engine_->options().model_id.empty() ? w->loaded_.name : w->engine_->options().model_id,
      buckets, w->engine_->scheduler_config().max_model_len);
  LogCapacity(w->loaded_, *w->engine_);
  // A colocated worker takes no part in KV transfers; a split group's ranks each move their
  // own slice (docs/parallel.md, "KV transfers with groups").
  const bool takes_transfers = flags.role != "colocated";
  // One registration of the whole pool (or its host copy) serves both directions
  // (docs/transport.md).
  if (w->pool_region_ == nullptr && takes_transfers) {
    BATON_ASSIGN_OR_RETURN(w->pool_region_, transport::RegisteredRegion::Register(
                                                *w->ucx_, w->engine_->kv_pool_data(),
                                                static_cast<size_t>(w->engine_->kv_pool_bytes())));
  }
  if (flags.role != "prefill" && takes_transfers) {
    KvReceiverOptions ro;
    ro.default_lease = absl::Seconds(flags.kv_lease_seconds);
    ro.max_share_per_caller = flags.max_reserved_share_per_caller;
    ro.auth = auth;
    BATON_ASSIGN_OR_RETURN(
        w->receiver_, KvReceiver::Create(w->engine_.get(), w->ucx_.get(), w->pool_region_.get(), ro,
                                         &w->metrics_, w->group_backend_));
  }
  if (flags.role != "decode" && takes_transfers) {
    SenderGroup sg;
    sg.backend = w->group_backend_;
    if (group_size > 1) {
      BATON_ASSIGN_OR_RETURN(sg.layouts, GroupPageLayouts(w->loaded_.model->config(), flags));
    }
    KvSenderOptions so;
    so.auth = auth;
    w->sender_ = std::make_unique<KvSender>(w->engine_.get(), w->ucx_.get(), w->pool_region_.get(),
                                            so, &w->metrics_, std::move(sg));
  }
  w->service_ = std::make_unique<WorkerService>(w->engine_.get(), w->receiver_.get(),
                                                w->sender_.get(), flags.role, auth);
  if (flags.metrics_port >= 0) {
    service::HttpServerOptions http;
    http.host = flags.host;
    http.port = flags.metrics_port;
    WorkerRuntime* self = w.get();
    BATON_ASSIGN_OR_RETURN(
        w->metrics_http_, service::HttpServer::Start(http, [self](const service::HttpRequest& req,
                                                                  service::HttpResponder& out) {
          if (req.path != "/metrics") {
            out.Send(404, "text/plain", "only /metrics is served here\n");
            return;
          }
          out.Send(200, service::kMetricsContentType, self->metrics_.Render(self->engine_.get()));
        }));
  }

  // Ours (service/health_service.h): gRPC's default is a callback service, whose polling
  // threads would take reads off every call in the process; `baton serve` runs the
  // router in this one too.
  grpc::EnableDefaultHealthCheckService(false);
  w->health_ = std::make_unique<service::HealthService>(
      std::vector<std::string>{"", "baton.internal.v1.Worker"});
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  const std::string address = HostPort(flags.host, flags.port);
  builder.AddListeningPort(address, auth->ServerCredentials(), &w->port_);
  // Routers and prefill workers ping every second to notice a stopped worker within 2 s
  // (InternalAuth::Channel); gRPC's server default (one ping per 5 min without calls)
  // would answer with GOAWAY too_many_pings.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 500);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  builder.RegisterService(w->service_->worker());
  builder.RegisterService(w->service_->kv_events());
  builder.RegisterService(w->health_.get());
  if (w->receiver_ != nullptr) builder.RegisterService(w->receiver_->service());
  w->server_ = builder.BuildAndStart();
  if (w->server_ == nullptr || w->port_ == 0) {
    return absl::UnavailableError(
        StrCat("cannot listen on ", address, "; is the port in use? Pick another with --port"));
  }
  if (group_size > 1) {
    // A group that lost a rank cannot serve again: say so to the router's health polls.
    WorkerRuntime* self = w.get();
    w->health_watch_ = std::thread([self] {
      while (!self->stopping_.load()) {
        if (absl::Status h = self->engine_->health(); !h.ok()) {
          LogError("baton worker: %s; the group is NOT_SERVING", std::string(h.message()).c_str());
          self->health_->Set("", grpc::health::v1::HealthCheckResponse::NOT_SERVING);
          self->health_->Set("baton.internal.v1.Worker",
                             grpc::health::v1::HealthCheckResponse::NOT_SERVING);
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    });
  }
  return w;
}

WorkerRuntime::~WorkerRuntime() { Shutdown(absl::ZeroDuration()); }

void WorkerRuntime::Drain(absl::Duration grace, absl::Duration last_words) {
  if (server_ != nullptr) {
    // The router's health polls see NOT_SERVING (within --health-poll-seconds) and route
    // around this worker; the calls that reach it meanwhile are refused UNAVAILABLE, which
    // the router places elsewhere.
    health_->Shutdown();
    service_->BeginDrain();
    const absl::Time deadline = absl::Now() + grace;
    while (service_->live_calls() > 0 && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(50));
    }
    if (service_->live_calls() > 0) service_->ExpireDrain();
  }
  Shutdown(last_words);
}

void WorkerRuntime::Shutdown(absl::Duration grace) {
  stopping_ = true;
  if (health_watch_.joinable()) health_watch_.join();
  if (server_ != nullptr) {
    health_->Shutdown();  // ends open Watch calls, which the server's Shutdown waits for
    server_->Shutdown(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(grace));
    server_.reset();
  }
  if (metrics_http_ != nullptr) metrics_http_->Shutdown(absl::Seconds(1));
  metrics_http_.reset();
  service_.reset();
  sender_.reset();
  receiver_.reset();  // frees the reservations still held
  if (pool_from_ucx_) {
    engine_.reset();  // the pool's memory is the region's: the engine goes first
    pool_region_.reset();
  } else {
    pool_region_.reset();  // before the pool's memory goes: no put is in flight now
    engine_.reset();       // ends whatever is still open
  }
  gpu_.reset();  // the engine's pages and forward were on it
  ucx_.reset();
  group_.reset();  // after the engine, whose backend tells the ranks to exit
}

}  // namespace baton::worker
