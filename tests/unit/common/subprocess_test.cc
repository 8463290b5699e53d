// Subprocess against real programs (sh, cat): lines both ways, the end of output, a read's
// timeout, the exit status of an exit and of a signal, Stop's bound, the environment, a
// program that does not exist, and /proc files of a process that is gone.
#include "common/subprocess.h"

#include <signal.h>
#include <unistd.h>

#include <string>

#include "gtest/gtest.h"

namespace baton {
namespace {

std::unique_ptr<Subprocess> Sh(const std::string& script, SubprocessOptions o = {}) {
  auto p = Subprocess::Start({"/bin/sh", "-c", script}, std::move(o));
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *std::move(p) : nullptr;
}

TEST(SubprocessTest, LinesGoBothWaysAndTheEndOfInputEndsTheChild) {
  SubprocessOptions o;
  o.search_path = true;
  o.pipe_stdin = true;
  auto cat = Subprocess::Start({"cat"}, o);
  ASSERT_TRUE(cat.ok()) << cat.status();
  ASSERT_TRUE((*cat)->WriteLine("one"));
  ASSERT_TRUE((*cat)->WriteLine("two words"));
  EXPECT_EQ((*cat)->ReadLine(absl::Seconds(10)), "one");
  EXPECT_EQ((*cat)->ReadLine(absl::Seconds(10)), "two words");
  (*cat)->CloseInput();
  EXPECT_EQ((*cat)->ReadLine(absl::Seconds(10)), std::nullopt);
  EXPECT_TRUE((*cat)->AtEnd());
  EXPECT_EQ((*cat)->Wait(), 0);
  EXPECT_FALSE((*cat)->WriteLine("after")) << "its input is closed";
}

TEST(SubprocessTest, AReadTimesOutWithoutEndingTheOutput) {
  auto p = Sh("sleep 2; echo late");
  const absl::Time start = absl::Now();
  EXPECT_EQ(p->ReadLine(absl::Milliseconds(100)), std::nullopt);
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  EXPECT_FALSE(p->AtEnd());
  EXPECT_EQ(p->ReadLine(absl::Seconds(10)), "late");
}

TEST(SubprocessTest, ExitCodesSignalsAndStop) {
  EXPECT_EQ(Sh("exit 3")->Wait(), 3);
  auto sleeper = Sh("exec sleep 30");
  sleeper->Signal(SIGKILL);
  EXPECT_EQ(sleeper->Wait(), 128 + SIGKILL);
  // A child that ignores SIGTERM outlives Stop's bound; SIGKILL does not.
  auto stubborn = Sh("trap '' TERM; echo ready; while :; do sleep 1; done");
  ASSERT_EQ(stubborn->ReadLine(absl::Seconds(10)), "ready");
  EXPECT_EQ(stubborn->Stop(SIGTERM, absl::Milliseconds(200)), std::nullopt);
  EXPECT_EQ(stubborn->Stop(SIGKILL, absl::Seconds(10)), 128 + SIGKILL);
}

TEST(SubprocessTest, StderrAndTheEnvironmentReachTheChild) {
  SubprocessOptions o;
  o.env = {"BATON_SUBPROCESS_TEST=set here", "HOME=/elsewhere"};
  o.pipe_stderr = true;
  auto p = Sh("echo \"$BATON_SUBPROCESS_TEST\" >&2; echo \"$HOME\"", o);
  EXPECT_EQ(p->ReadLine(absl::Seconds(10)), "set here");
  EXPECT_EQ(p->ReadLine(absl::Seconds(10)), "/elsewhere") << "an entry replaces the parent's";
  EXPECT_EQ(p->Wait(), 0);
}

TEST(SubprocessTest, AProgramThatDoesNotExistExitsWith127) {
  auto p = Subprocess::Start({"/no/such/program"});
  ASSERT_TRUE(p.ok()) << "exec fails in the child";
  EXPECT_EQ((*p)->Wait(), 127);
  EXPECT_FALSE(Subprocess::Start({}).ok());
}

// A running child's /proc files read whole; once it is reaped they read as "" (no throw).
TEST(SubprocessTest, ProcFilesOfAGoneProcessReadEmpty) {
  EXPECT_NE(ReadProcFile(getpid(), "cmdline").find(std::string("\0", 1)), std::string::npos);
  auto p = Sh("echo ready; while :; do sleep 1; done");
  ASSERT_EQ(p->ReadLine(absl::Seconds(10)), "ready");
  EXPECT_EQ(ReadProcFile(p->pid(), "stat").rfind(std::to_string(p->pid()) + " (sh) ", 0), 0u);
  p->Signal(SIGKILL);
  EXPECT_EQ(p->Wait(), 128 + SIGKILL);
  EXPECT_EQ(ReadProcFile(p->pid(), "stat"), "");
  EXPECT_EQ(ReadProcFile(p->pid(), "no-such-file"), "");
}

}  // namespace
}  // namespace baton
