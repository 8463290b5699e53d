#include "worker/group_ranks.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <thread>

#include "common/status.h"
#include "common/stop_signals.h"
#include "common/strings.h"
#include "engine/loaded_model.h"
#include "engine/parallel/worker_group.h"
#include "grpcpp/grpcpp.h"
#include "parallel/store.h"
#include "service/health_service.h"
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
    std::vector<std::string> args = {"worker",
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
                                     StrCat(f.group_timeout_ms)};
    if (f.no_mmap) args.emplace_back("--no-mmap");
    BATON_ASSIGN_OR_RETURN(auto child,
                           ChildProcess::Spawn(StrCat("group rank ", r), args, absl::Seconds(120)));
    std::fprintf(stderr, "baton worker: group rank %d of %d started (pid %d), %s\n", r,
                 f.group_size(), static_cast<int>(child->pid()), child->ready_line().c_str());
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

absl::Status RunGroupRank(const WorkerFlags& f, const std::string& name) {
  BlockStopSignals();
  if (f.group_store.empty()) {
    return absl::InvalidArgumentError(
        "--group-rank above 0 needs the leader's rendezvous (--group-store); ranks on one host "
        "are started by their leader, so run only rank 0 yourself");
  }
  engine::GroupOptions g;
  g.tp_size = f.tensor_parallel_size;
  g.pp_size = f.pipeline_parallel_size;
  g.rank = f.group_rank;
  g.address = f.host;
  g.timeout = std::chrono::milliseconds(f.group_timeout_ms);
  g.micro_batches = f.pp_micro_batches;
  parallel::FileStore store(f.group_store);
  g.store = &store;
  if (g.rank < 1 || g.rank >= f.group_size()) {
    return absl::InvalidArgumentError(
        StrCat("--group-rank ", g.rank, " is outside a group of ", f.group_size(), " ranks"));
  }

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

  model::OpenOptions open;
  open.use_mmap = !f.no_mmap;
  BATON_ASSIGN_OR_RETURN(engine::LoadedModel loaded,
                         engine::LoadModel(f.model, open, engine::PlacementOf(g)));
  BATON_ASSIGN_OR_RETURN(engine::GroupComms comms, engine::ConnectGroup(g));
  ThreadPool threads(f.threads);
  absl::Status result = engine::RunGroupFollower(*loaded.model, g, &comms, &threads, [&] {
    health.Set("", grpc::health::v1::HealthCheckResponse::SERVING);
  });
  health.Shutdown();
  server->Shutdown(std::chrono::system_clock::now());
  return result;
}

}  // namespace baton::worker
