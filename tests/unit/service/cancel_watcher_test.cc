#include "service/cancel_watcher.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace baton::service {
namespace {

using namespace std::chrono_literals;

TEST(CancelWatcherTest, CallsOnGoneOnceWhenThePredicateTurnsTrue) {
  CancelWatcher watcher(absl::Milliseconds(1));
  std::atomic<bool> gone{false};
  std::atomic<int> calls{0};
  absl::Notification fired;
  watcher.Watch([&] { return gone.load(); },
                [&] {
                  ++calls;
                  fired.Notify();
                });
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(calls.load(), 0);
  EXPECT_EQ(watcher.size(), 1u);
  gone = true;
  ASSERT_TRUE(fired.WaitForNotificationWithTimeout(absl::Seconds(5)));
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(watcher.size(), 0u);  // forgotten after firing
}

// With a socket, the predicate runs only when the socket hangs up: no polling, whatever the
// interval (an hour here), and the hang-up is seen at once.
TEST(CancelWatcherTest, ASocketsHangUpWakesTheWatcherWithoutPolling) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  CancelWatcher watcher(absl::Hours(1));
  std::atomic<int> checks{0};
  absl::Notification fired;
  watcher.Watch(
      [&] {
        ++checks;
        pollfd p{fds[0], POLLRDHUP, 0};
        return poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP)) != 0;
      },
      [&] { fired.Notify(); }, fds[0]);
  // Bytes from the client are not a hang-up.
  ASSERT_EQ(write(fds[1], "x", 1), 1);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(checks.load(), 0);
  const auto closed = std::chrono::steady_clock::now();
  close(fds[1]);
  ASSERT_TRUE(fired.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_LT(std::chrono::steady_clock::now() - closed, 1s);
  EXPECT_EQ(checks.load(), 1);
  EXPECT_EQ(watcher.size(), 0u);
  close(fds[0]);
}

// A socket entry that was unwatched before its hang-up never fires, and the descriptor
// may be closed and reused after Unwatch.
TEST(CancelWatcherTest, AnUnwatchedSocketNeverFires) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  CancelWatcher watcher(absl::Hours(1));
  std::atomic<int> calls{0};
  const uint64_t id = watcher.Watch([] { return true; }, [&] { ++calls; }, fds[0]);
  watcher.Unwatch(id);
  close(fds[1]);
  close(fds[0]);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(calls.load(), 0);
  EXPECT_EQ(watcher.size(), 0u);
}

TEST(CancelWatcherTest, UnwatchedEntriesNeverFire) {
  CancelWatcher watcher(absl::Milliseconds(1));
  std::atomic<bool> gone{false};
  std::atomic<int> calls{0};
  uint64_t id = watcher.Watch([&] { return gone.load(); }, [&] { ++calls; });
  watcher.Unwatch(id);
  gone = true;
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(calls.load(), 0);
  watcher.Unwatch(id);      // twice: ignored
  watcher.Unwatch(999999);  // unknown: ignored
}

TEST(CancelWatcherTest, UnwatchWaitsForARunningCallback) {
  CancelWatcher watcher(absl::Milliseconds(1));
  absl::Notification started;
  std::atomic<bool> finished{false};
  uint64_t id = watcher.Watch([] { return true; },
                              [&] {
                                started.Notify();
                                std::this_thread::sleep_for(100ms);
                                finished = true;
                              });
  ASSERT_TRUE(started.WaitForNotificationWithTimeout(absl::Seconds(5)));
  watcher.Unwatch(id);
  EXPECT_TRUE(finished.load());
}

TEST(CancelWatcherTest, CallbacksMayWatchAndUnwatch) {
  CancelWatcher watcher(absl::Milliseconds(1));
  absl::Notification second_fired;
  std::atomic<uint64_t> self{0};
  self = watcher.Watch([&] { return self.load() != 0; },
                       [&] {
                         watcher.Unwatch(self);  // on the watcher's thread: must not deadlock
                         watcher.Watch([] { return true; }, [&] { second_fired.Notify(); });
                       });
  EXPECT_TRUE(second_fired.WaitForNotificationWithTimeout(absl::Seconds(5)));
}

TEST(CancelWatcherTest, DestructorStopsWithEntriesLeft) {
  std::atomic<int> calls{0};
  {
    CancelWatcher watcher(absl::Seconds(10));  // long interval: the destructor must wake it
    watcher.Watch([] { return false; }, [&] { ++calls; });
  }
  EXPECT_EQ(calls.load(), 0);
}

// Many threads watch and unwatch while predicates flip. on_gone must run at most once per
// entry, and never after Unwatch has returned for it.
TEST(CancelWatcherTest, ConcurrentWatchAndUnwatch) {
  CancelWatcher watcher(absl::Microseconds(100));
  constexpr int kThreads = 8;
  constexpr int kPerThread = 300;
  std::atomic<int> violations{0};
  std::atomic<int> fired_total{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int i = 0; i < kPerThread; ++i) {
        struct State {
          std::atomic<bool> gone{false};
          std::atomic<bool> unwatched{false};
          std::atomic<int> calls{0};
        };
        auto state = std::make_shared<State>();
        uint64_t id = watcher.Watch([state] { return state->gone.load(); },
                                    [state, &violations, &fired_total] {
                                      if (state->unwatched.load()) ++violations;
                                      if (++state->calls > 1) ++violations;
                                      ++fired_total;
                                    });
        if (rng() % 2) state->gone = true;
        if (rng() % 3 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 500));
        watcher.Unwatch(id);
        state->unwatched = true;
        if (state->calls.load() > 1) ++violations;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(violations.load(), 0);
  EXPECT_GT(fired_total.load(), 0);
  EXPECT_EQ(watcher.size(), 0u);
}

}  // namespace
}  // namespace baton::service
