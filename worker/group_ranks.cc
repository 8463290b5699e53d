#include "worker/group_ranks.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "common/log.h"
#include "common/mapped_file.h"
#include "common/secret_token.h"
#include "common/status.h"
#include "common/stop_signals.h"
#include "common/strings.h"
#include "engine/loaded_model.h"
#include "engine/parallel/worker_group.h"
#include "grpcpp/grpcpp.h"
#include "model/weight_check.h"
#include "parallel/store.h"
#include "service/health_service.h"
#include "transport/registered_region.h"
#include "transport/ucx_worker.h"
#include "worker/rank_kv.h"
#include "worker/worker_runtime.h"

namespace baton::worker {

absl::StatusOr<std::unique_ptr<GroupRanks>> GroupRanks::Start(const WorkerFlags& f, int threads) {
  std::unique_ptr<GroupRanks> g(new GroupRanks());
  std::string tmpl = (std::filesystem::temp_directory_path() / "baton-group-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) {  // mode 0700: only this user's ranks meet here
    return absl::InternalError(StrCat("cannot make a rendezvous directory in ",
                                      std::filesystem::temp_directory_path().string()));
  }
  g->store_dir_ = tmpl;
  for (int r = 1; r < f.group_size(); ++r) {
    std::vector<std::string> args = f.rank_command;
    const std::vector<std::string> flags = {
        "--model",
        f.model,
        "--host",
        f.host,
        "--port",
        "0",
        "--threads",
        StrCat(threads),
        "--tensor-parallel-size",
        StrCat(f.tensor_parallel_size),
        "--pipeline-parallel-size",
        StrCat(f.pipeline_parallel_size),
        "--group-rank",
        StrCat(r),
        "--group-store",
        g->store_dir_,
        "--group-timeout-ms",
        StrCat(f.group_timeout_ms),
        "--kv-pool",
        f.kv_pool,
        "--kv-cache-dtype",
        f.kv_cache_dtype,
    };
    const std::vector<std::string> device = DeviceArgs(f.device, r);
    args.insert(args.end(), device.begin(), device.end());
    args.insert(args.end(), flags.begin(), flags.end());
    if (!f.rank_command.empty()) args.insert(args.end(), {"--role", f.role});
    if (!f.ucx_tls.empty()) args.insert(args.end(), {"--ucx-tls", f.ucx_tls});
    if (f.no_mmap) args.emplace_back("--no-mmap");
    if (f.check_weights) args.emplace_back("--check-weights");
    args.insert(args.end(), {"--quant-activations", f.quant_activations});
    BATON_ASSIGN_OR_RETURN(auto child,
                           ChildProcess::Spawn(StrCat("group rank ", r), args, absl::Seconds(120)));
    LogInfo("baton worker: group rank %d of %d started (pid %d), %s", r, f.group_size(),
            static_cast<int>(child->pid()), child->ready_line().c_str());
    g->ranks_.push_back(std::move(child));
  }
  return g;
}

GroupRanks::~GroupRanks() {
  for (auto& r : ranks_) r->Stop(absl::Seconds(2));
  ranks_.clear();
  std::error_code ec;
  std::filesystem::remove_all(store_dir_, ec);
}

std::vector<int> GroupRanks::pids() const {
  std::vector<int> out = {-1};
  for (const auto& r : ranks_) out.push_back(r->pid());
  return out;
}

absl::Status CheckGroupFlags(const WorkerFlags& f) {
  const int size = f.group_size();
  if (f.group_size_flag != 0 && f.group_size_flag != size) {
    return absl::InvalidArgumentError(
        StrCat("--group-size ", f.group_size_flag, " is not --tensor-parallel-size ",
               f.tensor_parallel_size, " x --pipeline-parallel-size ", f.pipeline_parallel_size,
               " = ", size, "; give the same parallel sizes on every rank"));
  }
  if (f.group_rank >= size) {
    return absl::InvalidArgumentError(StrCat("--group-rank ", f.group_rank,
                                             " is outside a group of ", size,
                                             " ranks (--tensor-parallel-size x "
                                             "--pipeline-parallel-size); it must be 0 to ",
                                             size - 1));
  }
  if (!f.group_leader.empty()) {
    std::string host;
    int port = 0;
    BATON_RETURN_IF_ERROR(parallel::SplitHostPort(f.group_leader, "--group-leader", &host, &port));
    if (f.auth.token_file.empty()) {
      return absl::InvalidArgumentError(
          "--group-leader needs --internal-token-file: the group's rendezvous port is open to "
          "the network, so every rank proves it belongs with the same secret file "
          "(e.g. `head -c 32 /dev/urandom | base64 > token`, copied to every host)");
    }
    if (size == 1) {
      return absl::InvalidArgumentError(
          "--group-leader is for a group of several ranks; give --tensor-parallel-size or "
          "--pipeline-parallel-size");
    }
  } else if (f.group_rank > 0 && f.group_store.empty()) {
    return absl::InvalidArgumentError(
        StrCat("--group-rank ", f.group_rank,
               " needs --group-leader HOST:PORT (rank 0's address) to meet its group; on one host, "
               "run only rank 0: it starts the other ranks itself"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<parallel::TcpStoreServer>> ServeGroupRendezvous(
    const WorkerFlags& f, engine::GroupOptions* group) {
  parallel::TcpStoreServerOptions o;
  BATON_RETURN_IF_ERROR(
      parallel::SplitHostPort(f.group_leader, "--group-leader", &o.host, &o.port));
  if (o.host == "0.0.0.0" || o.host == "::") {
    return absl::InvalidArgumentError(
        StrCat("--group-leader ", f.group_leader,
               " is not an address the other ranks can reach; give rank 0's own address"));
  }
  BATON_ASSIGN_OR_RETURN(o.token, ReadTokenFile(f.auth.token_file, "--internal-token-file"));
  BATON_ASSIGN_OR_RETURN(std::unique_ptr<parallel::TcpStoreServer> server,
                         parallel::TcpStoreServer::Start(o));
  group->address = o.host;
  group->rendezvous_timeout = kMultiHostRendezvous;
  LogInfo("baton worker: group leader: waiting up to %d min at %s for ranks 1 to %d",
          static_cast<int>(kMultiHostRendezvous.count()), f.group_leader.c_str(),
          f.group_size() - 1);
  return server;
}

absl::StatusOr<std::vector<kvcache::PageLayout>> GroupPageLayouts(const model::ModelConfig& config,
                                                                  const WorkerFlags& f) {
  std::vector<kvcache::PageLayout> out;
  for (int r = 0; r < f.group_size(); ++r) {
    engine::GroupOptions o;
    o.tp_size = f.tensor_parallel_size;
    o.pp_size = f.pipeline_parallel_size;
    o.rank = r;
    BATON_ASSIGN_OR_RETURN(model::Shard shard, model::PlanShard(config, engine::PlacementOf(o)));
    out.push_back(engine::PageLayoutFor(shard, config, f.block_size, f.kv_cache_dtype));
  }
  return out;
}

absl::Status RunGroupRank(const WorkerFlags& f, const std::string& name) {
  BlockStopSignals();
  BATON_RETURN_IF_ERROR(CheckGroupFlags(f));
  engine::GroupOptions g;
  g.tp_size = f.tensor_parallel_size;
  g.pp_size = f.pipeline_parallel_size;
  g.rank = f.group_rank;
  g.address = f.host;
  g.timeout = std::chrono::milliseconds(f.group_timeout_ms);
  g.micro_batches = f.pp_micro_batches;

  // Health first, so that the leader (and a prober) sees this rank while it loads.
  service::HealthService health({""});
  health.Set("", grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  grpc::EnableDefaultHealthCheckService(false);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(StrCat(f.host, ":", f.port), grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&health);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return absl::UnavailableError(StrCat("group rank ", g.rank, ": cannot listen on ", f.host, ":",
                                         f.port, "; pick another --port"));
  }
  const std::string line = StrCat(name, ": group rank ", g.rank, " of ", f.group_size(),
                                  " serving health on ", f.host, ":", port, "\n");
  if (f.ready_fd < 0) {
    std::fputs(line.c_str(), stdout);
    std::fflush(stdout);
  } else {  // started by its leader, whose stdout is its own first line
    (void)!write(f.ready_fd, line.data(), line.size());
    close(f.ready_fd);
  }
  // A stop signal (the leader stopping us, or dying: PR_SET_PDEATHSIG) ends the rank at
  // once: it holds nothing that outlives the process.
  std::thread([] {
    WaitForStopSignal();
    std::_Exit(0);
  }).detach();

  std::unique_ptr<parallel::Store> store;
  if (!f.group_leader.empty()) {
    // Reach the leader first: a wrong token or address fails now, not after the load.
    BATON_ASSIGN_OR_RETURN(std::string token,
                           ReadTokenFile(f.auth.token_file, "--internal-token-file"));
    LogInfo("%s: group rank %d: meeting the leader at %s", name.c_str(), g.rank,
            f.group_leader.c_str());
    BATON_ASSIGN_OR_RETURN(
        std::unique_ptr<parallel::TcpStore> tcp,
        parallel::TcpStore::Connect(f.group_leader, token, kMultiHostRendezvous));
    g.address = tcp->local_address();  // the interface that reaches the leader
    g.rendezvous_timeout = kMultiHostRendezvous;
    store = std::move(tcp);
  } else {
    store = std::make_unique<parallel::FileStore>(f.group_store);
  }
  g.store = store.get();

  model::OpenOptions open;
  open.use_mmap = !f.no_mmap;
  open.int8_activations = f.quant_activations == "int8";
  BATON_ASSIGN_OR_RETURN(engine::LoadedModel loaded,
                         engine::LoadModel(f.model, open, engine::PlacementOf(g)));
  if (f.check_weights) BATON_RETURN_IF_ERROR(model::CheckWeightsFinite(*loaded.model));
  BATON_ASSIGN_OR_RETURN(engine::GroupComms comms, engine::ConnectGroup(g));
  ThreadPool threads(f.threads);
  // A split group's rank moves its own slice of each transfer (docs/parallel.md): its own
  // UCX worker and registered pool. Declared before the follower's pool: they outlive it.
  std::unique_ptr<transport::UcxWorker> ucx;
  std::unique_ptr<transport::RegisteredRegion> region;
  engine::RankKvSetup kv;
  if (f.role != "colocated") {
    BATON_ASSIGN_OR_RETURN(const transport::UcxOptions ucx_options, TransferUcxOptions(f));
    BATON_ASSIGN_OR_RETURN(ucx, transport::UcxWorker::Create(ucx_options));
    if (f.kv_pool == "ucx" ||
        (f.kv_pool == "auto" && f.role == "decode" && transport::MayUseSharedMemory(f.ucx_tls))) {
      kv.pool_memory = [&](size_t bytes) -> absl::StatusOr<void*> {
        BATON_ASSIGN_OR_RETURN(region, transport::RegisteredRegion::Allocate(*ucx, bytes));
        return region->data();
      };
    }
    kv.make = [&](kvcache::KvPool* pool) -> absl::StatusOr<std::unique_ptr<engine::RankKv>> {
      if (region == nullptr) {
        BATON_ASSIGN_OR_RETURN(
            region, transport::RegisteredRegion::Register(
                        *ucx, pool->block_data(0),
                        static_cast<size_t>(pool->layout().page_bytes() * pool->num_blocks())));
      }
      return std::unique_ptr<engine::RankKv>(std::make_unique<UcxRankKv>(
          ucx.get(), region.get(), pool, g.rank, KvSenderOptions{}.flush_timeout));
    };
  }
  absl::Status result = engine::RunGroupFollower(
      *loaded.model, g, &comms, &threads,
      [&] { health.Set("", grpc::health::v1::HealthCheckResponse::SERVING); }, kv);
  health.Shutdown();
  server->Shutdown(std::chrono::system_clock::now());
  return result;
}

}  // namespace baton::worker
