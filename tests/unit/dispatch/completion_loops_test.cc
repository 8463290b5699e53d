#include "dispatch/completion_loops.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include "grpcpp/alarm.h"
#include "gtest/gtest.h"

namespace baton::dispatch {
namespace {

// Records which thread ran it and whether the operation succeeded.
class Probe final : public LoopTag {
 public:
  void Done(bool ok) override {
    std::lock_guard<std::mutex> lock(mu);
    this->ok = ok;
    thread = std::this_thread::get_id();
    done = true;
    cv.notify_all();
  }
  bool Wait() {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(5), [this] { return done; });
  }
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  bool ok = false;
  std::thread::id thread;
};

TEST(CompletionLoopsTest, RunsEachTagOnTheThreadOfItsQueue) {
  auto loops = CompletionLoops::Create(2);
  ASSERT_EQ(loops->size(), 2);
  EXPECT_EQ(loops->server_queue(0), nullptr);
  grpc::CompletionQueue* a = loops->Pick();
  grpc::CompletionQueue* b = loops->Pick();
  EXPECT_NE(a, b);
  EXPECT_EQ(loops->Pick(), a);  // in turn

  // An alarm completes on its queue: the operation gRPC offers without a peer.
  Probe pa1, pa2, pb;
  grpc::Alarm alarm_a1, alarm_a2, alarm_b;
  const auto now = std::chrono::system_clock::now();
  alarm_a1.Set(a, now, &pa1);
  alarm_a2.Set(a, now, &pa2);
  alarm_b.Set(b, now, &pb);
  ASSERT_TRUE(pa1.Wait() && pa2.Wait() && pb.Wait());
  EXPECT_TRUE(pa1.ok && pa2.ok && pb.ok);
  EXPECT_EQ(pa1.thread, pa2.thread);
  EXPECT_NE(pa1.thread, pb.thread);
  EXPECT_NE(pa1.thread, std::this_thread::get_id());
}

TEST(CompletionLoopsTest, MemberTagCallsItsMember) {
  struct Counter {
    void OnDone(bool ok) { ok ? ++oks : ++fails; }
    int oks = 0;
    int fails = 0;
  } counter;
  MemberTag<Counter> tag(&counter, &Counter::OnDone);
  LoopTag& as_tag = tag;
  as_tag.Done(true);
  as_tag.Done(false);
  as_tag.Done(true);
  EXPECT_EQ(counter.oks, 2);
  EXPECT_EQ(counter.fails, 1);
}

TEST(CompletionLoopsTest, ShutdownDeliversCancelledOperationsThenStops) {
  auto loops = CompletionLoops::Create(1);
  Probe probe;
  grpc::Alarm alarm;
  alarm.Set(loops->Pick(), std::chrono::system_clock::now() + std::chrono::hours(1), &probe);
  alarm.Cancel();  // a cancelled operation still completes, with ok = false
  ASSERT_TRUE(probe.Wait());
  EXPECT_FALSE(probe.ok);
  loops->Shutdown();
  loops->Shutdown();  // once is enough; twice is harmless
}

}  // namespace
}  // namespace baton::dispatch
