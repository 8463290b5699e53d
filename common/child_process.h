// A part of a benchmark run in a process of its own: this same binary, started again with
// other arguments, so that what it costs (CPU time, context switches, its own gRPC
// pollers) is its own, as it is when the part runs as a separate server. The child is
// told "--ready-fd N" and writes one line there once it serves (its ports, say); it gets
// SIGTERM when the parent stops it or dies. Started by Subprocess (common/subprocess.h),
// the one way Baton starts another program.
//
//   BATON_ASSIGN_OR_RETURN(auto stub, ChildProcess::Spawn("stub", {"--role", "stub"}));
//   int port = std::stoi(stub->ready_line());
//   CpuUsage before = stub->Usage();
//   ... measure ...
//   double cpu_s = stub->Usage().cpu_s - before.cpu_s;
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/subprocess.h"

namespace baton {

struct CpuUsage {
  double cpu_s = 0;      // user plus system, all threads
  int64_t switches = 0;  // context switches, voluntary or not: mostly thread hand-offs
};

// This process, from getrusage.
CpuUsage SelfUsage();

class ChildProcess {
 public:
  // Starts /proc/self/exe with `args` plus "--ready-fd N" and waits up to `start_timeout`
  // for its first line on that descriptor. Descriptors the parent opened without
  // close-on-exec stay open in the child. `name` is for messages.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Spawn(
      std::string name, std::vector<std::string> args,
      absl::Duration start_timeout = absl::Seconds(30));
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return running_ ? process_->pid() : -1; }
  // What the child wrote on its ready descriptor, without the newline.
  const std::string& ready_line() const { return ready_line_; }

  // CPU time from /proc/PID/stat, in clock ticks (10 ms), exited threads included.
  // Switches stay 0: /proc counts them per thread, and threads that exited are lost.
  CpuUsage Usage() const;

  // SIGTERM, then SIGKILL after `grace`. True when it exited with status 0 on SIGTERM;
  // false when it was stopped already, exited otherwise, or had to be killed.
  bool Stop(absl::Duration grace = absl::Seconds(5));

 private:
  ChildProcess(std::string name, std::unique_ptr<Subprocess> process)
      : name_(std::move(name)), process_(std::move(process)) {}

  std::string name_;
  std::unique_ptr<Subprocess> process_;
  bool running_ = true;  // until Stop
  std::string ready_line_;
};

}  // namespace baton
