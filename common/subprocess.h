// A child process with optional pipes to its stdin and from its stdout (and stderr): the one
// way Baton starts another program, for `baton serve`'s local cluster and for the
// multi-process tests. fork and exec from a threaded parent: the child runs only
// async-signal-safe calls before exec (its environment and argv are built beforehand).
//
//   BATON_ASSIGN_OR_RETURN(auto p, Subprocess::Start({"/proc/self/exe", "worker", ...}));
//   std::optional<std::string> line = p->ReadLine(absl::Seconds(60));  // "... on 127.0.0.1:N"
//   p->Signal(SIGKILL);
//   int status = p->Wait();       // its exit code, or 128 + the signal that ended it
//
// The destructor kills a child that is still running (SIGKILL) and reaps it.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace baton {

struct SubprocessOptions {
  bool search_path = false;      // argv[0] is looked up in PATH
  std::vector<std::string> env;  // "NAME=value" entries set in the child's environment
  // WriteLine / CloseInput; else the parent's stdin. The parent then ignores SIGPIPE, so
  // that a child that stops reading fails a write instead of killing the parent.
  bool pipe_stdin = false;
  bool pipe_stdout = true;   // ReadLine; else the parent's stdout
  bool pipe_stderr = false;  // stderr into the same pipe as stdout (ReadLine)
  // SIGTERM when the parent dies (PR_SET_PDEATHSIG), and an empty signal mask: a parent
  // that blocks its stop signals to wait for them does not pass that on.
  bool die_with_parent = false;
};

class Subprocess {
 public:
  static absl::StatusOr<std::unique_ptr<Subprocess>> Start(std::vector<std::string> argv,
                                                           const SubprocessOptions& options = {});
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }

  // The next line of its output, without the newline; nullopt at the end of the output or
  // once `timeout` passed (AtEnd tells which).
  std::optional<std::string> ReadLine(absl::Duration timeout = absl::InfiniteDuration());
  bool AtEnd() const { return at_end_; }
  // No more output is read; a child that writes more gets SIGPIPE or EPIPE.
  void CloseOutput();

  // False when the child no longer reads.
  bool WriteLine(std::string_view line);
  // End of input for the child, which a line-reading child takes as the end.
  void CloseInput();

  void Signal(int sig);
  // Sends `sig` and waits up to `timeout` for the exit: as Wait, or nullopt.
  std::optional<int> Stop(int sig, absl::Duration timeout);
  // Closes its input and waits for it: its exit code, or 128 + the signal that ended it.
  int Wait();
  // As Wait once it has exited; nullopt while it runs. Does not wait.
  std::optional<int> Poll() { return Reap(false); }

 private:
  Subprocess() = default;
  // Reaps the child if it exited (`block`: waits for it); its status once reaped.
  std::optional<int> Reap(bool block);

  pid_t pid_ = -1;
  std::optional<int> status_;  // once reaped
  int in_ = -1;
  int out_ = -1;
  std::string buffered_;  // read past the last line returned
  bool at_end_ = false;
};

// /proc/<pid>/<name> (stat, cmdline), or "" once the process is gone. Read with read(2):
// a process that exits between open and read fails the read with ESRCH, which std::filebuf
// throws as an exception rather than ending the stream.
std::string ReadProcFile(pid_t pid, std::string_view name);

}  // namespace baton
