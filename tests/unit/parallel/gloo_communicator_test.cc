// The gloo Communicator for real: every rank is a thread with its own gloo context, and
// the ranks talk over loopback TCP exactly as separate processes would.
#include "parallel/gloo_communicator.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace baton::parallel {
namespace {

std::string FreshDir() {
  static std::atomic<int> counter{0};
  std::string dir = (std::filesystem::temp_directory_path() /
                     ("baton_gloo_" + std::to_string(getpid()) + "_" + std::to_string(counter++)))
                        .string();
  std::filesystem::create_directories(dir);
  return dir;
}

// Runs fn(comm) on `size` ranks at once; returns each rank's status.
std::vector<absl::Status> RunGroup(int size, const std::function<absl::Status(Communicator&)>& fn,
                                   std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  FileStore store(FreshDir());
  std::vector<absl::Status> results(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      GlooOptions o;
      o.rank = r;
      o.size = size;
      o.store = &store;
      o.timeout = timeout;
      auto comm = ConnectGloo(o);
      if (!comm.ok()) {
        results[r] = comm.status();
        return;
      }
      results[r] = fn(**comm);
    });
  }
  for (auto& t : threads) t.join();
  std::filesystem::remove_all(store.dir());
  return results;
}

void ExpectAllOk(const std::vector<absl::Status>& results) {
  for (size_t r = 0; r < results.size(); ++r)
    EXPECT_TRUE(results[r].ok()) << r << ": " << results[r];
}

uint16_t Bf16(float f) {  // exact for the small integers used here
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return static_cast<uint16_t>(bits >> 16);
}
float FromBf16(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

class GlooSizes : public ::testing::TestWithParam<int> {};

TEST_P(GlooSizes, AllReduceSumsInRankOrder) {
  const int size = GetParam();
  ExpectAllOk(RunGroup(size, [size](Communicator& c) -> absl::Status {
    // Values whose sum depends on the order: rank r contributes 1e8 * (r == 0) + r * 0.75.
    for (size_t n : {size_t{1}, size_t{1000}, size_t{300000}}) {
      std::vector<float> data(n);
      for (size_t i = 0; i < n; ++i) {
        data[i] = (c.rank() == 0 ? 1e8f : 0.0f) + c.rank() * 0.75f + static_cast<float>(i % 7);
      }
      if (auto s = c.AllReduceSum(std::span<float>(data)); !s.ok()) return s;
      for (size_t i = 0; i < n; ++i) {
        float want = 1e8f + static_cast<float>(i % 7);
        for (int r = 1; r < size; ++r) want += r * 0.75f + static_cast<float>(i % 7);
        if (data[i] != want) {
          return absl::InternalError("element " + std::to_string(i) + " of " + std::to_string(n) +
                                     ": " + std::to_string(data[i]) +
                                     " != " + std::to_string(want));
        }
      }
    }
    return absl::OkStatus();
  }));
}

TEST_P(GlooSizes, AllReduceBf16) {
  const int size = GetParam();
  ExpectAllOk(RunGroup(size, [size](Communicator& c) -> absl::Status {
    std::vector<uint16_t> data(777);
    for (size_t i = 0; i < data.size(); ++i) data[i] = Bf16(static_cast<float>(c.rank() + i % 5));
    if (auto s = c.AllReduceSumBf16(std::span<uint16_t>(data)); !s.ok()) return s;
    for (size_t i = 0; i < data.size(); ++i) {
      const float want = static_cast<float>(size * (size - 1) / 2 + size * (i % 5));
      if (FromBf16(data[i]) != want)
        return absl::InternalError("bf16 element " + std::to_string(i));
    }
    return absl::OkStatus();
  }));
}

TEST_P(GlooSizes, GatherBroadcastBarrierSendRecv) {
  const int size = GetParam();
  ExpectAllOk(RunGroup(size, [size](Communicator& c) -> absl::Status {
    std::vector<int32_t> mine = {c.rank() * 10, c.rank() * 10 + 1, c.rank() * 10 + 2};
    std::vector<int32_t> all(3 * size);
    if (auto s = c.AllGather(AsBytes(std::span<const int32_t>(mine)),
                             AsWritableBytes(std::span<int32_t>(all)));
        !s.ok()) {
      return s;
    }
    for (int r = 0; r < size; ++r) {
      for (int j = 0; j < 3; ++j) {
        if (all[r * 3 + j] != r * 10 + j) return absl::InternalError("all-gather");
      }
    }
    std::vector<int64_t> plan(5, c.rank() == size - 1 ? 42 : -1);
    if (auto s = c.Broadcast(AsWritableBytes(std::span<int64_t>(plan)), size - 1); !s.ok())
      return s;
    for (int64_t v : plan) {
      if (v != 42) return absl::InternalError("broadcast");
    }
    if (auto s = c.Barrier(); !s.ok()) return s;
    if (size == 1) return absl::OkStatus();
    // A ring of posted sends: each rank sends two messages to the next under two tags and
    // receives them from the previous in the other order, so that tags keep them apart.
    const int next = (c.rank() + 1) % size, prev = (c.rank() + size - 1) % size;
    std::vector<float> out_a(100, static_cast<float>(c.rank())), out_b(50, -1.0f * c.rank());
    std::vector<float> in_a(100), in_b(50);
    auto sb = c.PostSend(AsBytes(std::span<const float>(out_b)), next, 2);
    auto sa = c.PostSend(AsBytes(std::span<const float>(out_a)), next, 1);
    if (!sa.ok() || !sb.ok()) return absl::InternalError("post");
    if (auto s = c.Recv(AsWritableBytes(std::span<float>(in_a)), prev, 1); !s.ok()) return s;
    if (auto s = c.Recv(AsWritableBytes(std::span<float>(in_b)), prev, 2); !s.ok()) return s;
    if (auto s = (*sa)->Wait(); !s.ok()) return s;
    if (auto s = (*sb)->Wait(); !s.ok()) return s;
    if (in_a[99] != static_cast<float>(prev) || in_b[0] != -1.0f * prev) {
      return absl::InternalError("send/recv");
    }
    return absl::OkStatus();
  }));
}

INSTANTIATE_TEST_SUITE_P(Ranks, GlooSizes, ::testing::Values(1, 2, 3, 4));

TEST(Gloo, ACollectiveThatAPeerNeverJoinsTimesOut) {
  const auto start = std::chrono::steady_clock::now();
  auto results = RunGroup(
      2,
      [](Communicator& c) -> absl::Status {
        if (c.rank() == 1) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // hangs, then leaves
          return absl::OkStatus();
        }
        std::vector<float> x(16, 1.0f);
        absl::Status s = c.AllReduceSum(std::span<float>(x));
        // Broken from here on: the next call fails at once.
        absl::Status again = c.Barrier();
        if (again.ok()) return absl::InternalError("a broken communicator answered OK");
        return s;
      },
      std::chrono::milliseconds(500));
  EXPECT_TRUE(results[1].ok());
  EXPECT_FALSE(results[0].ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(results[0]) || absl::IsUnavailable(results[0]))
      << results[0];
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(Gloo, RendezvousWithoutTheOtherRanksTimesOut) {
  FileStore store(FreshDir());
  GlooOptions o;
  o.rank = 0;
  o.size = 2;
  o.store = &store;
  o.timeout = std::chrono::milliseconds(300);
  auto comm = ConnectGloo(o);
  ASSERT_FALSE(comm.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(comm.status())) << comm.status();
  std::filesystem::remove_all(store.dir());
}

TEST(Gloo, BadArguments) {
  GlooOptions o;
  o.rank = 2;
  o.size = 2;
  EXPECT_TRUE(absl::IsInvalidArgument(ConnectGloo(o).status()));
  ExpectAllOk(RunGroup(2, [](Communicator& c) -> absl::Status {
    std::vector<std::byte> in(4), out(4);
    if (!absl::IsInvalidArgument(c.AllGather(in, out)))
      return absl::InternalError("all-gather size");
    if (!absl::IsInvalidArgument(c.Broadcast(out, 5))) return absl::InternalError("root");
    if (!absl::IsInvalidArgument(c.Send(in, c.rank(), 0))) return absl::InternalError("self send");
    return c.Barrier();
  }));
}

}  // namespace
}  // namespace baton::parallel
