#include "tools/local_cluster.h"

#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <regex>

#include "common/log.h"
#include "common/status.h"
#include "common/strings.h"

namespace baton::tools {
namespace {

// The flags a worker process gets: the same engine as `baton serve` would run itself.
std::vector<std::string> WorkerArgs(const worker::WorkerFlags& f, const std::string& role, int port,
                                    int metrics_port) {
  std::vector<std::string> a = {"worker",
                                "--role",
                                role,
                                "--model",
                                f.model,
                                "--host",
                                "127.0.0.1",
                                "--port",
                                StrCat(port),
                                "--threads",
                                StrCat(f.threads),
                                "--kv-cache-fraction",
                                StrCat(f.kv_cache_fraction),
                                "--block-size",
                                StrCat(f.block_size),
                                "--kv-cache-dtype",
                                f.kv_cache_dtype,
                                "--max-running",
                                StrCat(f.max_running),
                                "--max-waiting",
                                StrCat(f.max_waiting),
                                "--max-batched-tokens",
                                StrCat(f.max_batched_tokens),
                                "--max-prefill-chunk",
                                StrCat(f.max_prefill_chunk),
                                "--max-model-len",
                                StrCat(f.max_model_len),
                                "--kv-lease-seconds",
                                StrCat(f.kv_lease_seconds),
                                "--max-reserved-share-per-caller",
                                StrCat(f.max_reserved_share_per_caller),
                                "--tensor-parallel-size",
                                StrCat(f.tensor_parallel_size),
                                "--pipeline-parallel-size",
                                StrCat(f.pipeline_parallel_size),
                                "--group-timeout-ms",
                                StrCat(f.group_timeout_ms),
                                "--metrics-port",
                                StrCat(metrics_port)};
  for (const std::string& spec : f.histogram_buckets)
    a.insert(a.end(), {"--histogram-buckets", spec});
  const std::vector<std::string> device = worker::DeviceArgs(f.device);
  a.insert(a.end(), device.begin(), device.end());
  if (!f.kv_cache_memory.empty()) a.insert(a.end(), {"--kv-cache-memory", f.kv_cache_memory});
  if (!f.ucx_tls.empty()) a.insert(a.end(), {"--ucx-tls", f.ucx_tls});
  if (f.kv_pool != "auto") a.insert(a.end(), {"--kv-pool", f.kv_pool});
  if (f.no_prefix_cache) a.emplace_back("--no-prefix-cache");
  if (f.no_mmap) a.emplace_back("--no-mmap");
  if (f.check_weights) a.emplace_back("--check-weights");
  a.insert(a.end(), {"--quant-activations", f.quant_activations});
  const std::vector<std::string> auth = service::InternalAuthArgs(f.auth);
  a.insert(a.end(), auth.begin(), auth.end());
  return a;
}

}  // namespace

absl::StatusOr<std::unique_ptr<LocalCluster>> LocalCluster::Start(const worker::WorkerFlags& worker,
                                                                  Pool prefill, Pool decode,
                                                                  absl::Duration start_timeout) {
  const int num_prefill = prefill.workers, num_decode = decode.workers;
  if (num_prefill < 1 || num_decode < 1) {
    return absl::InvalidArgumentError(StrCat("--prefill is ", num_prefill, " and --decode is ",
                                             num_decode,
                                             "; a split cluster needs at least one "
                                             "of each"));
  }
  std::unique_ptr<LocalCluster> c(new LocalCluster());
  // The workers share this host: split the cores and the KV-cache memory between them
  // unless the user sized them.
  // (A group's leader divides a fraction between its ranks; a size is each rank's.)
  worker::WorkerFlags each = worker;
  const int ranks = num_prefill * prefill.tensor_parallel * prefill.pipeline_parallel +
                    num_decode * decode.tensor_parallel * decode.pipeline_parallel;
  if (each.threads == 0) {
    each.threads = std::max(1, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)) / ranks);
  }
  if (each.kv_cache_memory.empty()) {
    each.kv_cache_fraction = worker.kv_cache_fraction / (num_prefill + num_decode);
  }
  // On GPUs each worker takes the next tensor x pipeline GPUs, from --device-id on.
  int next_device = worker.device.device_id;
  for (int i = 0; i < num_decode + num_prefill; ++i) {
    const bool is_decode = i < num_decode;
    const std::string role = is_decode ? "decode" : "prefill";
    const Pool& pool = is_decode ? decode : prefill;
    each.tensor_parallel_size = pool.tensor_parallel;
    each.pipeline_parallel_size = pool.pipeline_parallel;
    each.device.device_id = next_device;
    next_device += pool.tensor_parallel * pool.pipeline_parallel;
    // A fixed --metrics-port is the first child's; the others take the ports after it.
    const int metrics_port =
        worker.metrics_port > 0 ? worker.metrics_port + i : worker.metrics_port;
    absl::StatusOr<Process> p = c->Spawn(each, role, start_timeout, 0, metrics_port);
    if (!p.ok()) return p.status();  // the destructor stops those already started
    c->processes_.push_back(*std::move(p));
  }
  return c;
}

absl::StatusOr<LocalCluster::Process> LocalCluster::Spawn(const worker::WorkerFlags& flags,
                                                          const std::string& role,
                                                          absl::Duration start_timeout, int port,
                                                          int metrics_port,
                                                          const std::atomic<bool>* cancel) {
  std::vector<std::string> argv = WorkerArgs(flags, role, port, metrics_port);
  argv.insert(argv.begin(), "/proc/self/exe");
  // The parent blocks the stop signals for its own waiting; the worker waits on them too.
  SubprocessOptions options;
  options.die_with_parent = true;
  BATON_ASSIGN_OR_RETURN(std::unique_ptr<Subprocess> child,
                         Subprocess::Start(std::move(argv), options));
  // The first stdout line says where it listens; model loading may take a while.
  std::optional<std::string> line;
  for (const absl::Time give_up = absl::Now() + start_timeout;
       !line && !child->AtEnd() && absl::Now() < give_up &&
       (cancel == nullptr || !cancel->load());) {
    line = child->ReadLine(absl::Milliseconds(200));
  }
  child->CloseOutput();  // later stdout lines have nowhere to go; workers log to stderr
  std::smatch m;
  if (!line || !std::regex_search(*line, m, std::regex(R"(on 127\.0\.0\.1:(\d+))"))) {
    return absl::UnavailableError(StrCat("the ", role, " worker did not start",
                                         line ? StrCat(" (it said '", *line, "')") : "",
                                         "; its error is above"));  // ~Subprocess kills it
  }
  Process p;
  p.process = std::move(child);
  p.role = role;
  p.port = std::stoi(m[1].str());
  p.target = StrCat("127.0.0.1:", p.port);
  p.metrics_port = -1;
  if (std::regex_search(*line, m, std::regex(R"(, metrics (http://\S+:(\d+)/metrics))"))) {
    p.metrics_url = m[1].str();
    p.metrics_port = std::stoi(m[2].str());
  }
  p.flags = flags;
  p.started = absl::Now();
  LogInfo("baton serve: %s worker at %s (pid %d)", role.c_str(), p.target.c_str(),
          static_cast<int>(p.process->pid()));
  return p;
}

void LocalCluster::Supervise(std::function<void(const std::string& role)> on_restart,
                             std::function<void(const std::string& why)> on_give_up,
                             int max_failed_starts) {
  on_restart_ = std::move(on_restart);
  on_give_up_ = std::move(on_give_up);
  supervisor_ = std::thread([this, max_failed_starts] { SuperviseLoop(max_failed_starts); });
}

bool LocalCluster::SleepUnlessStopping(absl::Duration d) {
  std::unique_lock<std::mutex> lock(mu_);
  return !wake_.wait_for(lock, absl::ToChronoMilliseconds(d), [this] { return stopping_.load(); });
}

void LocalCluster::SuperviseLoop(int max_failed_starts) {
  while (SleepUnlessStopping(absl::Milliseconds(200))) {
    for (Process& p : processes_) {
      const std::optional<int> status = p.process->Poll();
      if (!status || stopping_.load()) continue;
      // A worker that ran a minute was healthy: its next restart is quick again.
      if (absl::Now() - p.started > absl::Minutes(1)) p.backoff = absl::Milliseconds(500);
      LogWarn(
          "baton serve: the %s worker at %s (pid %d) exited with status %d; starting it "
          "again in %.1f s",
          p.role.c_str(), p.target.c_str(), static_cast<int>(p.process->pid()), *status,
          absl::ToDoubleSeconds(p.backoff));
      if (!SleepUnlessStopping(p.backoff)) return;
      p.backoff = std::min(p.backoff * 2, absl::Seconds(30));
      // The same ports again, so that the router's address and Prometheus's target stay right.
      absl::StatusOr<Process> again =
          Spawn(p.flags, p.role, absl::Minutes(10), p.port, p.metrics_port, &stopping_);
      if (stopping_.load()) return;
      if (!again.ok()) {
        LogError("baton serve: %s", std::string(again.status().message()).c_str());
        if (++p.failed_starts >= max_failed_starts) {
          if (on_give_up_) {
            on_give_up_(StrCat("the ", p.role, " worker at ", p.target, " failed to start ",
                               p.failed_starts, " times in a row"));
          }
          return;
        }
        continue;  // the old child stays reaped: Poll() says so again, after a longer backoff
      }
      again->backoff = p.backoff;
      p = *std::move(again);
      if (on_restart_) on_restart_(p.role);
    }
  }
}

std::string LocalCluster::Targets(const std::string& role) const {
  std::string out;
  for (const Process& p : processes_) {
    if (p.role != role) continue;
    if (!out.empty()) out += ",";
    out += p.target;
  }
  return out;
}

std::string LocalCluster::metrics_banner() const {
  std::string out;
  for (const Process& p : processes_) {
    if (p.metrics_url.empty()) continue;
    out += StrCat(out.empty() ? "" : ", ", p.role, " ", p.target, " metrics ", p.metrics_url);
  }
  return out;
}

std::string LocalCluster::prefill_targets() const { return Targets("prefill"); }
std::string LocalCluster::decode_targets() const { return Targets("decode"); }

void LocalCluster::Stop(absl::Duration grace) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_.store(true);
  }
  wake_.notify_all();
  if (supervisor_.joinable()) supervisor_.join();
  for (const Process& p : processes_) p.process->Signal(SIGTERM);
  const absl::Time deadline = absl::Now() + grace;
  for (Process& p : processes_) {
    // What is left of the grace period; then ~Subprocess sends SIGKILL.
    (void)p.process->Stop(SIGTERM, std::max(deadline - absl::Now(), absl::ZeroDuration()));
  }
  processes_.clear();
}

LocalCluster::~LocalCluster() { Stop(); }

}  // namespace baton::tools
