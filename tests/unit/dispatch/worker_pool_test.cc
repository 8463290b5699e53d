// WorkerPool without any worker process: membership from static lists and from DNS names
// (the resolver replaced at its seam), and the decisions Pick makes from the pool's own
// counts: which workers are candidates, the in-flight limit, and rerouting after a failure.
// The health poll and the KV event feed start only with Start(), which these tests do not
// call; tests/integration/cache_aware_router_test.cc runs them against real workers.
#include "dispatch/worker_pool.h"

#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::dispatch {
namespace {

using ::testing::HasSubstr;

// A DNS name whose addresses the test sets.
struct FakeDns {
  std::mutex mu;
  std::vector<std::string> addresses;
  void Set(std::vector<std::string> a) {
    std::lock_guard<std::mutex> lock(mu);
    addresses = std::move(a);
  }
  PoolOptions Options() {
    PoolOptions o;
    o.policy = "round_robin";
    o.resolve = [this](const std::string& host) {
      std::lock_guard<std::mutex> lock(mu);
      return host == "svc.ns" ? addresses : std::vector<std::string>{};
    };
    return o;
  }
};

std::set<std::string> Live(const WorkerPool& pool) {
  std::set<std::string> out;
  for (size_t i = 0; i < pool.size(); ++i) {
    if (!pool.gone(static_cast<routing::WorkerId>(i)))
      out.insert(pool.target(static_cast<routing::WorkerId>(i)));
  }
  return out;
}

const std::vector<int32_t> kPrompt = {1, 2, 3, 4, 5};

TEST(WorkerPoolTest, DnsEntriesFollowTheNamesAddresses) {
  FakeDns dns;
  dns.Set({"10.0.0.1", "10.0.0.2"});
  auto pool = WorkerPool::Create("", "", "dns:svc.ns:50061", dns.Options());
  ASSERT_TRUE(pool.ok()) << pool.status();
  EXPECT_EQ(Live(**pool), (std::set<std::string>{"10.0.0.1:50061", "10.0.0.2:50061"}));
  dns.Set({"10.0.0.2", "10.0.0.3"});
  (*pool)->Refresh();
  EXPECT_EQ(Live(**pool), (std::set<std::string>{"10.0.0.2:50061", "10.0.0.3:50061"}));
  dns.Set({"10.0.0.1"});
  (*pool)->Refresh();
  EXPECT_EQ(Live(**pool), (std::set<std::string>{"10.0.0.1:50061"}));
  EXPECT_EQ((*pool)->size(), 3u) << "a returning address takes its old slot";
  // Only listed workers are candidates.
  for (int i = 0; i < 4; ++i) {
    absl::StatusOr<Route> r = (*pool)->Pick(kPrompt, "");
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->decode->target(), "10.0.0.1:50061");
  }
}

TEST(WorkerPoolTest, BadEntriesAndEmptyNamesAreClearErrors) {
  FakeDns dns;
  for (const char* bad : {"dns:svc.ns", "dns:svc.ns:0", "dns::50061", "dns:svc.ns:http"}) {
    auto pool = WorkerPool::Create("", "", bad, dns.Options());
    ASSERT_FALSE(pool.ok()) << bad;
    EXPECT_THAT(pool.status().message(), HasSubstr("dns:HOST:PORT")) << bad;
  }
  auto empty = WorkerPool::Create("", "", "dns:svc.ns:50061", dns.Options());
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kUnavailable);
  auto only_prefill = WorkerPool::Create("", "127.0.0.1:1", "", dns.Options());
  ASSERT_FALSE(only_prefill.ok());
  EXPECT_THAT(only_prefill.status().message(), HasSubstr("--decode-worker"));
}

TEST(WorkerPoolTest, GetaddrinfoResolvesLocalhost) {
  const std::vector<std::string> got = ResolveTargets("localhost", 80, PoolOptions{});
  EXPECT_THAT(got, ::testing::Contains("127.0.0.1:80"));
  EXPECT_TRUE(ResolveTargets("no-such-host.invalid", 80, PoolOptions{}).empty());
}

TEST(WorkerPoolTest, AFullPoolIsResourceExhaustedAndRoutesGiveTheirLoadBack) {
  PoolOptions o;
  o.max_inflight_per_worker = 2;
  auto pool = WorkerPool::Create("127.0.0.1:1,127.0.0.1:2", "", "", o);
  ASSERT_TRUE(pool.ok());
  std::vector<Route> held;
  for (int i = 0; i < 4; ++i) {
    absl::StatusOr<Route> r = (*pool)->Pick(kPrompt, "");
    ASSERT_TRUE(r.ok()) << i;
    held.push_back(*std::move(r));
  }
  absl::StatusOr<Route> full = (*pool)->Pick(kPrompt, "");
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(full.status().message(), HasSubstr("--max-inflight-per-worker=2"));
  held.pop_back();  // a request ends
  EXPECT_TRUE((*pool)->Pick(kPrompt, "").ok());
}

TEST(WorkerPoolTest, ARerouteMarksTheFailedWorkerDownAndGoesElsewhere) {
  PoolOptions o;
  o.policy = "round_robin";
  auto pool = WorkerPool::Create("127.0.0.1:1,127.0.0.1:2", "", "", o);
  ASSERT_TRUE(pool.ok());
  absl::StatusOr<Route> first = (*pool)->Pick(kPrompt, "");
  ASSERT_TRUE(first.ok());
  absl::StatusOr<Route> next = RerouteAfterFailure(*first, kPrompt, "", "");
  ASSERT_TRUE(next.ok());
  EXPECT_NE(next->decode, first->decode);
  for (int i = 0; i < 4; ++i) EXPECT_EQ((*pool)->Pick(kPrompt, "")->decode, next->decode);
  // With no worker left, the second failure is the client's answer.
  EXPECT_EQ(RerouteAfterFailure(*next, kPrompt, "", "").status().code(),
            absl::StatusCode::kUnavailable);
  // A route made by hand has no pool to retry in.
  EXPECT_FALSE(RerouteAfterFailure(Route(first->decode), kPrompt, "", "").ok());
}

}  // namespace
}  // namespace baton::dispatch
