#include "bench/frontdoor_stamps.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gtest/gtest.h"

namespace baton::bench {
namespace {

using std::chrono::nanoseconds;

Clock::time_point At(int64_t ns) { return Clock::time_point(nanoseconds(ns)); }

TEST(StampSlotTest, TakesTheNumberAfterTheLastHash) {
  EXPECT_EQ(StampSlot("p1-s3-r0#3"), 3);
  EXPECT_EQ(StampSlot("a#b#17"), 17);
  EXPECT_EQ(StampSlot("p1-s3-w"), -1);
  EXPECT_EQ(StampSlot("p1#"), -1);
  EXPECT_EQ(StampSlot("p1#-2"), -1);
  EXPECT_EQ(StampSlot("p1#2x"), -1);
  EXPECT_EQ(StampSlot("p1#99999999999999999999999"), -1);
  EXPECT_EQ(StampSlot(""), -1);
}

TEST(StampTableTest, RecordsResetsAndIgnoresWhatDoesNotFit) {
  auto table = StampTable::Create(2, 3);
  ASSERT_TRUE(table.ok()) << table.status();
  StampTable& t = **table;
  EXPECT_TRUE(t.Stamps(0).empty());
  t.Record(0, {At(10), At(20)});
  t.Record(1, {At(1), At(2), At(3), At(4)});  // one event more than the table holds
  t.Record(2, {At(5)});                       // no such slot
  t.Record(-1, {At(5)});
  EXPECT_EQ(t.Stamps(0), (std::vector<Clock::time_point>{At(10), At(20)}));
  EXPECT_EQ(t.Stamps(1), (std::vector<Clock::time_point>{At(1), At(2), At(3)}));
  EXPECT_TRUE(t.Stamps(2).empty());
  t.Reset();
  EXPECT_TRUE(t.Stamps(0).empty());
  EXPECT_TRUE(t.Stamps(1).empty());
}

TEST(StampTableTest, WaitForCallsTimesOutWithTheCount) {
  auto table = StampTable::Create(1, 1);
  ASSERT_TRUE(table.ok());
  (*table)->EndCall();
  EXPECT_TRUE((*table)->WaitForCalls(1, absl::Milliseconds(10)).ok());
  absl::Status s = (*table)->WaitForCalls(2, absl::Milliseconds(10));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(s.message().find("1 of 2"), std::string_view::npos) << s;
}

TEST(StampTableTest, RejectsSizesOutOfBounds) {
  EXPECT_EQ(StampTable::Create(0, 8).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(StampTable::Create(8, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(StampTable::Create(int64_t{1} << 20, int64_t{1} << 20).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(StampTableTest, AnotherProcessRecordsAndSetsNothingElse) {
  auto table = StampTable::Create(4, 8);
  ASSERT_TRUE(table.ok());
  (*table)->set_interval(std::chrono::microseconds(2500));
  (*table)->set_aligned(true);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // As the stub process does: attach to the inherited descriptor, by a number of its own.
    auto attached = StampTable::Attach(dup((*table)->fd()));
    bool ok = attached.ok() && (*attached)->interval() == std::chrono::microseconds(2500) &&
              (*attached)->aligned() && (*attached)->slots() == 4 && (*attached)->tokens() == 8;
    if (ok) {
      (*attached)->Record(StampSlot("p1-s3-r0#3"), {At(7), At(9)});
      (*attached)->EndCall();
    }
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_TRUE((*table)->WaitForCalls(1, absl::Seconds(5)).ok());
  EXPECT_EQ((*table)->Stamps(3), (std::vector<Clock::time_point>{At(7), At(9)}));
}

TEST(StampTableTest, AttachRejectsWhatIsNotATable) {
  EXPECT_EQ(StampTable::Attach(-1).status().code(), absl::StatusCode::kInvalidArgument);
  const int fd = memfd_create("not_a_table", 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 4096), 0);  // zeroes: no magic number
  absl::Status s = StampTable::Attach(fd).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--stamps-fd"), std::string_view::npos) << s;
  const int small = memfd_create("too_small", 0);
  ASSERT_GE(small, 0);
  EXPECT_EQ(StampTable::Attach(small).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace baton::bench
