#include "common/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "common/strings.h"

extern char** environ;

namespace baton {
namespace {

// `base` with `overrides` ("NAME=value") replacing entries of the same name.
std::vector<std::string> Environment(const std::vector<std::string>& overrides) {
  std::vector<std::string> out;
  auto name = [](std::string_view e) { return e.substr(0, e.find('=')); };
  for (char** e = environ; *e != nullptr; ++e) {
    bool replaced = false;
    for (const std::string& o : overrides) replaced = replaced || name(o) == name(*e);
    if (!replaced) out.emplace_back(*e);
  }
  out.insert(out.end(), overrides.begin(), overrides.end());
  return out;
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

int ExitStatus(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Subprocess>> Subprocess::Start(std::vector<std::string> argv,
                                                              const SubprocessOptions& options) {
  if (argv.empty()) return absl::InvalidArgumentError("Subprocess::Start needs a program");
  std::vector<std::string> env = Environment(options.env);
  std::vector<char*> argp = Pointers(argv);
  std::vector<char*> envp = Pointers(env);
  // Pipes close on exec, so that no other child inherits them; dup2 clears the flag on
  // the child's own ends.
  int in[2] = {-1, -1};
  int out[2] = {-1, -1};
  auto close_all = [&] {
    for (int fd : {in[0], in[1], out[0], out[1]}) {
      if (fd >= 0) close(fd);
    }
  };
  if ((options.pipe_stdin && pipe2(in, O_CLOEXEC) != 0) ||
      ((options.pipe_stdout || options.pipe_stderr) && pipe2(out, O_CLOEXEC) != 0)) {
    close_all();
    return absl::InternalError(StrCat("pipe2 failed: ", std::strerror(errno)));
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    close_all();
    return absl::InternalError(StrCat("fork failed: ", std::strerror(errno)));
  }
  if (pid == 0) {  // async-signal-safe calls only
    if (options.die_with_parent) {
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() != parent) _exit(1);  // the parent died before prctl
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
    }
    if (in[0] >= 0) dup2(in[0], STDIN_FILENO);
    if (options.pipe_stdout) dup2(out[1], STDOUT_FILENO);
    if (options.pipe_stderr) dup2(out[1], STDERR_FILENO);
    if (options.search_path) {
      execvpe(argp[0], argp.data(), envp.data());
    } else {
      execve(argp[0], argp.data(), envp.data());
    }
    _exit(127);
  }
  std::unique_ptr<Subprocess> p(new Subprocess());
  p->pid_ = pid;
  if (in[0] >= 0) close(in[0]);
  if (out[1] >= 0) close(out[1]);
  p->in_ = in[1];
  p->out_ = out[0];
  if (p->in_ >= 0) signal(SIGPIPE, SIG_IGN);  // a child that stopped reading: EPIPE instead
  return p;
}

Subprocess::~Subprocess() {
  CloseInput();
  CloseOutput();
  if (!status_.has_value() && pid_ > 0) {
    kill(pid_, SIGKILL);
    Reap(/*block=*/true);
  }
}

std::optional<std::string> Subprocess::ReadLine(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    if (const size_t nl = buffered_.find('\n'); nl != std::string::npos) {
      std::string line = buffered_.substr(0, nl);
      buffered_.erase(0, nl + 1);
      return line;
    }
    if (out_ < 0 || at_end_) return std::nullopt;
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return std::nullopt;
    pollfd p{out_, POLLIN, 0};
    const int wait_ms =
        left == absl::InfiniteDuration()
            ? -1
            : static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 1 << 30));
    const int ready = poll(&p, 1, wait_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;  // the deadline check above ends it
    char buf[4096];
    const ssize_t n = read(out_, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      at_end_ = true;
      if (buffered_.empty()) return std::nullopt;
      std::string last = std::move(buffered_);  // a last line without its newline
      buffered_.clear();
      return last;
    }
    buffered_.append(buf, static_cast<size_t>(n));
  }
}

void Subprocess::CloseOutput() {
  if (out_ >= 0) close(out_);
  out_ = -1;
}

bool Subprocess::WriteLine(std::string_view line) {
  if (in_ < 0) return false;
  std::string data = StrCat(line, "\n");
  for (size_t done = 0; done < data.size();) {
    const ssize_t n = write(in_, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

void Subprocess::CloseInput() {
  if (in_ >= 0) close(in_);
  in_ = -1;
}

void Subprocess::Signal(int sig) {
  if (pid_ > 0 && !status_.has_value()) kill(pid_, sig);
}

std::optional<int> Subprocess::Reap(bool block) {
  if (status_.has_value() || pid_ <= 0) return status_;
  int status = 0;
  pid_t r;
  do {
    r = waitpid(pid_, &status, block ? 0 : WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == pid_) status_ = ExitStatus(status);
  return status_;
}

std::optional<int> Subprocess::Stop(int sig, absl::Duration timeout) {
  Signal(sig);
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    if (std::optional<int> s = Reap(/*block=*/false)) return s;
    if (absl::Now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

int Subprocess::Wait() {
  CloseInput();
  return Reap(/*block=*/true).value_or(-1);
}

std::string ReadProcFile(pid_t pid, std::string_view name) {
  const std::string path = StrCat("/proc/", pid, "/", name);
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string all;
  char buf[1024];
  ssize_t n = 0;
  while ((n = read(fd, buf, sizeof(buf))) > 0) all.append(buf, static_cast<size_t>(n));
  close(fd);
  return n < 0 ? "" : all;
}

}  // namespace baton
