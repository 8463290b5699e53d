// The worker processes of `baton serve --prefill N --decode M`: N prefill and M decode
// workers, each `baton worker --role ...` in its own process on loopback with a port the
// system picks. They die with the parent (PR_SET_PDEATHSIG), and Stop() ends them with
// SIGTERM (SIGKILL after a grace period).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/subprocess.h"
#include "worker/worker_runtime.h"

namespace baton::tools {

class LocalCluster {
 public:
  // `worker` holds the model and engine flags every worker gets; --host, --port and
  // --role are set here. Each pool's workers are groups of `prefill` / `decode` ranks
  // (tensor x pipeline parallel sizes). Waits up to `start_timeout` for each to announce
  // its port.
  struct Pool {
    int workers = 0;
    int tensor_parallel = 1;
    int pipeline_parallel = 1;
  };
  static absl::StatusOr<std::unique_ptr<LocalCluster>> Start(const worker::WorkerFlags& worker,
                                                             Pool prefill, Pool decode,
                                                             absl::Duration start_timeout);
  ~LocalCluster();  // Stop()
  LocalCluster(const LocalCluster&) = delete;
  LocalCluster& operator=(const LocalCluster&) = delete;

  // Comma-separated host:port lists, as the router's flags take them.
  std::string prefill_targets() const;
  std::string decode_targets() const;

  void Stop(absl::Duration grace = absl::Seconds(5));

 private:
  struct Process {
    std::unique_ptr<Subprocess> process;
    std::string role;
    std::string target;
  };
  LocalCluster() = default;
  absl::StatusOr<Process> Spawn(const worker::WorkerFlags& flags, const std::string& role,
                                absl::Duration start_timeout);
  std::string Targets(const std::string& role) const;

  std::vector<Process> processes_;
};

}  // namespace baton::tools
