// A worker process for the multi-process tests: started on a free loopback port with the
// bundled model, its address read from its first stdout line, and a stub to it.
#pragma once

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "baton/internal/v1/worker.grpc.pb.h"
#include "common/subprocess.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/unit/transport/ucx_test_util.h"

namespace baton::testing {

struct WorkerProc {
  std::unique_ptr<ChildProcess> process;
  std::string target;
  int metrics_port = -1;  // with --metrics-port
  std::unique_ptr<baton::internal::v1::Worker::Stub> stub;

  // `argv0` is the binary, with its subcommand if any ({"baton", "worker"}).
  WorkerProc(std::vector<std::string> argv0, const std::string& tls,
             const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv = std::move(argv0);
    const std::vector<std::string> common = {"--model",
                                             std::string(BATON_SOURCE_DIR) + "/models/baton-tiny",
                                             "--port",
                                             "0",
                                             "--threads",
                                             "1",
                                             "--kv-cache-memory",
                                             "16MiB",
                                             "--ucx-tls",
                                             tls};
    argv.insert(argv.end(), common.begin(), common.end());
    argv.insert(argv.end(), extra.begin(), extra.end());
    process = std::make_unique<ChildProcess>(argv);
    const std::string line = process->ReadLine();
    std::smatch m;
    if (!std::regex_search(line, m, std::regex(R"(on (127\.0\.0\.1:\d+))"))) {
      ADD_FAILURE() << argv[0] << " did not start: '" << line << "'";
      return;
    }
    target = m[1].str();
    if (std::regex_search(line, m, std::regex(R"(metrics http://\S+:(\d+)/metrics)"))) {
      metrics_port = std::stoi(m[1].str());
    }
    stub = baton::internal::v1::Worker::NewStub(
        grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  }

  baton::internal::v1::GetStatsResponse Stats() {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    baton::internal::v1::GetStatsResponse out;
    (void)stub->GetStats(&ctx, {}, &out);
    return out;
  }

  // Polls until `done(stats)` or `seconds` pass; returns the last stats.
  baton::internal::v1::GetStatsResponse WaitFor(
      const std::function<bool(const baton::internal::v1::GetStatsResponse&)>& done,
      double seconds) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    baton::internal::v1::GetStatsResponse s = Stats();
    while (!done(s) && std::chrono::steady_clock::now() < end) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      s = Stats();
    }
    return s;
  }
};

// Sends `request` to 127.0.0.1:`port` and reads until the server closes: the response's
// body, or "" when nothing (or no header end) came back.
inline std::string HttpExchange(int port, const std::string& request) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
    char buf[4096];
    for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) response.append(buf, n);
  }
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  return body == std::string::npos ? "" : response.substr(body + 4);
}

// GET /metrics from a worker's --metrics-port (or a router's HTTP port): the body.
inline std::string ScrapeMetrics(int port) {
  return HttpExchange(port, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
}

// The value of the sample line that starts with `series` (name and labels), or -1.
inline double MetricValue(const std::string& text, const std::string& series) {
  size_t at = 0;
  while ((at = text.find(series + " ", at)) != std::string::npos) {
    if (at == 0 || text[at - 1] == '\n') return std::stod(text.substr(at + series.size() + 1));
    ++at;
  }
  return -1;
}

// The sum of every sample named exactly `name` (any labels) whose line contains `label`
// (for example finished_reason="length"); 0 when there is none.
inline double MetricSum(const std::string& text, const std::string& name,
                        const std::string& label = "") {
  double sum = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name, 0) != 0 || line.size() <= name.size()) continue;
    const char next = line[name.size()];
    if (next != ' ' && next != '{') continue;
    if (!label.empty() && line.find(label) == std::string::npos) continue;
    sum += std::stod(line.substr(line.rfind(' ') + 1));
  }
  return sum;
}

// A worker's engine metrics (docs/operations.md, "Metrics"), and what every process serves.
inline const std::vector<std::string> kWorkerEngineMetrics = {
    "baton_num_requests_running",          "baton_num_requests_waiting",
    "baton_kv_cache_usage_ratio",          "baton_prefix_cache_queried_tokens_total",
    "baton_prefix_cache_hit_tokens_total", "baton_num_preemptions_total",
    "baton_request_success_total",         "baton_iteration_tokens",
    "baton_request_prompt_tokens",         "baton_request_generation_tokens",
    "baton_request_queue_time_seconds",    "baton_request_prefill_time_seconds",
    "baton_request_decode_time_seconds"};
inline const std::vector<std::string> kProcessMetrics = {"baton_build_info",
                                                         "process_cpu_seconds_total",
                                                         "process_resident_memory_bytes",
                                                         "process_virtual_memory_bytes",
                                                         "process_open_fds",
                                                         "process_max_fds",
                                                         "process_start_time_seconds"};

// Every metric of the worker set is there, each of its samples labelled model_name=`model`;
// the process metrics too; the KV usage ratio is in [0, 1].
inline void ExpectWorkerMetricSet(const std::string& text, const std::string& model) {
  for (const std::string& name : kProcessMetrics) {
    EXPECT_NE(text.find("\n# TYPE " + name + " "), std::string::npos) << name;
  }
  const std::string label = "model_name=\"" + model + "\"";
  for (const std::string& name : kWorkerEngineMetrics) {
    EXPECT_NE(text.find("\n# TYPE " + name + " "), std::string::npos) << name;
    std::istringstream lines(text);
    int samples = 0;
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind(name, 0) != 0 || line[0] == '#') continue;
      const char next = line.size() > name.size() ? line[name.size()] : ' ';
      if (next != '{' && next != '_' && next != ' ') continue;
      ++samples;
      EXPECT_NE(line.find(label), std::string::npos) << line;
    }
    EXPECT_GT(samples, 0) << name;
  }
  const double usage = MetricSum(text, "baton_kv_cache_usage_ratio");
  EXPECT_GE(usage, 0);
  EXPECT_LE(usage, 1);
  EXPECT_GT(MetricSum(text, "process_resident_memory_bytes"), 0);
}

// Children of `parent`, from /proc/*/stat: a group leader's ranks.
inline std::vector<pid_t> ChildrenOf(pid_t parent) {
  std::vector<pid_t> out;
  DIR* d = opendir("/proc");
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    const pid_t pid = static_cast<pid_t>(atoi(e->d_name));
    if (pid <= 0) continue;
    const std::string all = ReadProcFile(pid, "stat");
    const size_t paren = all.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream fields(all.substr(paren + 2));
    std::string state;
    pid_t ppid = 0;
    fields >> state >> ppid;
    if (ppid == parent && state != "Z") out.push_back(pid);
  }
  closedir(d);
  return out;
}

// Nothing running, queued or reserved, and no page in use.
inline bool NoPagesHeld(const baton::internal::v1::GetStatsResponse& s) {
  return s.pages_used() == 0 && s.kv_reservations() == 0 && s.running() == 0 && s.waiting() == 0;
}

// Runs `argv` to its end: its exit status and what it wrote to stderr (for errors that
// must name a flag).
inline std::pair<int, std::string> RunToExit(std::vector<std::string> argv) {
  SubprocessOptions o;
  o.pipe_stdout = false;
  o.pipe_stderr = true;
  auto p = Subprocess::Start(std::move(argv), o);
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok()) return {-1, ""};
  std::string err;
  while (std::optional<std::string> line = (*p)->ReadLine()) err += *line + "\n";
  return {(*p)->Wait(), err};
}

}  // namespace baton::testing
