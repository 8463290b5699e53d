#include "common/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <sstream>

#include "common/strings.h"

namespace baton {

CpuUsage SelfUsage() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return {s(u.ru_utime) + s(u.ru_stime), u.ru_nvcsw + u.ru_nivcsw};
}

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Spawn(std::string name,
                                                                  std::vector<std::string> args,
                                                                  absl::Duration start_timeout) {
  // The write end is the one descriptor the child inherits on purpose; the read end
  // closes on exec, in this child and in any other.
  int ready[2];
  if (pipe2(ready, O_CLOEXEC) != 0 || fcntl(ready[1], F_SETFD, 0) != 0) {
    return absl::InternalError(StrCat("pipe: ", std::strerror(errno)));
  }
  args.insert(args.begin(), "/proc/self/exe");
  args.emplace_back("--ready-fd");
  args.push_back(StrCat(ready[1]));
  SubprocessOptions options;
  options.pipe_stdout = false;  // its output goes where ours does
  options.die_with_parent = true;
  absl::StatusOr<std::unique_ptr<Subprocess>> started = Subprocess::Start(std::move(args), options);
  close(ready[1]);
  if (!started.ok()) {
    close(ready[0]);
    return started.status();
  }
  std::unique_ptr<ChildProcess> child(new ChildProcess(std::move(name), *std::move(started)));
  std::string line;
  bool done = false;
  const absl::Time deadline = absl::Now() + start_timeout;
  while (!done && absl::Now() < deadline) {
    pollfd pfd{ready[0], POLLIN, 0};
    if (poll(&pfd, 1, 100) <= 0) continue;
    char ch = 0;
    if (read(ready[0], &ch, 1) != 1) break;  // it exited without a line
    if (ch == '\n') {
      done = true;
    } else if (line.size() < 4096) {
      line += ch;
    }
  }
  close(ready[0]);
  if (!done) {
    child->Stop(absl::ZeroDuration());
    return absl::UnavailableError(StrCat("the ", child->name_, " process did not start within ",
                                         absl::FormatDuration(start_timeout),
                                         "; its error is above"));
  }
  child->ready_line_ = std::move(line);
  return child;
}

ChildProcess::~ChildProcess() { Stop(); }

CpuUsage ChildProcess::Usage() const {
  CpuUsage u;
  if (!running_) return u;
  // Fields 14 and 15 of /proc/PID/stat, counted after the command name's ')'.
  const std::string all = ReadProcFile(process_->pid(), "stat");
  const size_t close_paren = all.rfind(')');
  if (close_paren != std::string::npos) {
    std::istringstream fields(all.substr(close_paren + 2));
    std::string field;
    double ticks = 0;
    for (int i = 3; i <= 15 && fields >> field; ++i) {
      if (i >= 14) ticks += std::strtod(field.c_str(), nullptr);
    }
    u.cpu_s = ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
  }
  return u;
}

bool ChildProcess::Stop(absl::Duration grace) {
  if (!running_) return false;
  running_ = false;
  const std::optional<int> code = process_->Stop(SIGTERM, grace);
  if (code) return *code == 0;
  process_->Signal(SIGKILL);
  process_->Wait();
  return false;
}

}  // namespace baton
