#include "common/child_process.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

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
  int ready[2];
  if (pipe(ready) != 0) return absl::InternalError(StrCat("pipe: ", std::strerror(errno)));
  args.insert(args.begin(), "/proc/self/exe");
  args.emplace_back("--ready-fd");
  args.push_back(StrCat(ready[1]));
  // Built before fork: the child may only make async-signal-safe calls until exec.
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    close(ready[0]);
    close(ready[1]);
    return absl::InternalError(StrCat("fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(1);  // the parent is gone already
    close(ready[0]);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(ready[1]);
  std::unique_ptr<ChildProcess> child(new ChildProcess(std::move(name), pid));
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
  if (pid_ <= 0) return u;
  // Fields 14 and 15 of /proc/PID/stat, counted after the command name's ')'.
  std::ifstream stat(StrCat("/proc/", pid_, "/stat"));
  std::string all((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
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
  if (pid_ <= 0) return false;
  bool clean = kill(pid_, SIGTERM) == 0;
  const absl::Time deadline = absl::Now() + grace;
  int status = 0;
  while (waitpid(pid_, &status, WNOHANG) != pid_) {
    if (absl::Now() >= deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      clean = false;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  pid_ = -1;
  return clean && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace baton
