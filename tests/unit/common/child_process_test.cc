#include "common/child_process.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>

#include "common/strings.h"
#include "gtest/gtest.h"

namespace baton {
namespace {

// The descriptor after "--ready-fd" on this process's command line, if any.
std::optional<int> ReadyFd() {
  std::ifstream in("/proc/self/cmdline");
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  bool next = false;
  for (size_t at = 0; at < all.size();) {
    const size_t end = all.find('\0', at);
    const std::string arg = all.substr(at, end - at);
    if (next) return std::stoi(arg);
    next = arg == "--ready-fd";
    at = end == std::string::npos ? all.size() : end + 1;
  }
  return std::nullopt;
}

// The child's side: this test binary, started again by the tests below.
TEST(ChildProcessTest, ChildSide) {
  const std::optional<int> fd = ReadyFd();
  if (!fd) GTEST_SKIP() << "runs only as the child of the ChildProcessTest tests";
  signal(SIGTERM, [](int) { _exit(0); });
  dprintf(*fd, "pid %d\n", static_cast<int>(getpid()));
  close(*fd);
  for (;;) pause();
}

TEST(ChildProcessTest, ReadsTheReadyLineAndStopsTheChild) {
  auto child = ChildProcess::Spawn("child", {"--gtest_filter=ChildProcessTest.ChildSide"});
  ASSERT_TRUE(child.ok()) << child.status();
  const pid_t pid = (*child)->pid();
  EXPECT_GT(pid, 0);
  EXPECT_EQ((*child)->ready_line(), StrCat("pid ", pid));
  EXPECT_GE((*child)->Usage().cpu_s, 0.0);
  EXPECT_TRUE((*child)->Stop(absl::Seconds(10)));  // exit 0 on SIGTERM
  EXPECT_EQ((*child)->pid(), -1);
  EXPECT_FALSE((*child)->Stop());
  EXPECT_NE(kill(pid, 0), 0) << "reaped";
}

TEST(ChildProcessTest, AChildThatExitsWithoutItsLineFailsToStart) {
  // No test matches: the binary exits at once without writing on its ready descriptor.
  auto child =
      ChildProcess::Spawn("silent", {"--gtest_filter=NoSuchTest.Anywhere"}, absl::Seconds(20));
  ASSERT_FALSE(child.ok());
  EXPECT_EQ(child.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(child.status().message().find("the silent process did not start"), std::string::npos)
      << child.status();
}

}  // namespace
}  // namespace baton
