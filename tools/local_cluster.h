// The worker processes of `baton serve --prefill N --decode M`: N prefill and M decode
// workers, each `baton worker --role ...` in its own process on loopback with a port the
// system picks. They die with the parent (PR_SET_PDEATHSIG), and Stop() ends them with
// SIGTERM (SIGKILL after a grace period). Supervise() restarts one that exits on its own.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
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
  // "ROLE HOST:PORT metrics http://HOST:PORT/metrics" for each worker that serves metrics,
  // comma-separated (empty with --metrics-port -1). A fixed --metrics-port P gives the
  // workers P, P+1, ...; a restarted worker keeps its port.
  std::string metrics_banner() const;

  // From now on, a worker that exits on its own (killed, crashed) is started again with the
  // same flags on the same port, so the router's address for it stays right: after 0.5 s,
  // doubling with each restart that did not last a minute, up to 30 s. `on_restart(role)`
  // is called for each restart; `on_give_up(why)` once, when a worker failed to start
  // `max_failed_starts` times in a row (it exited again before announcing its port).
  void Supervise(std::function<void(const std::string& role)> on_restart,
                 std::function<void(const std::string& why)> on_give_up, int max_failed_starts = 5);

  void Stop(absl::Duration grace = absl::Seconds(5));

 private:
  struct Process {
    std::unique_ptr<Subprocess> process;
    std::string role;
    std::string target;
    int port = 0;
    int metrics_port = -1;      // -1: none
    std::string metrics_url;    // http://HOST:PORT/metrics, or empty
    worker::WorkerFlags flags;  // what a restart runs again
    absl::Time started;
    absl::Duration backoff = absl::Milliseconds(500);
    int failed_starts = 0;
  };
  LocalCluster() = default;
  // `port` 0: one the system picks; `metrics_port` as --metrics-port. Gives up waiting for
  // the banner when `cancel` is set.
  absl::StatusOr<Process> Spawn(const worker::WorkerFlags& flags, const std::string& role,
                                absl::Duration start_timeout, int port, int metrics_port,
                                const std::atomic<bool>* cancel = nullptr);
  std::string Targets(const std::string& role) const;
  void SuperviseLoop(int max_failed_starts);
  // Waits up to `d`; false once Stop() began.
  bool SleepUnlessStopping(absl::Duration d);

  std::vector<Process> processes_;  // the supervisor's once it runs
  std::function<void(const std::string&)> on_restart_, on_give_up_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::atomic<bool> stopping_{false};
  std::thread supervisor_;
};

}  // namespace baton::tools
