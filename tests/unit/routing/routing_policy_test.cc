// The placement policies on small hand-built pools: each decision here follows from the
// policy's documented rule, and would change if the rule did.
#include "routing/routing_policy.h"

#include <algorithm>
#include <set>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kvcache/block_hash.h"

namespace baton::routing {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kBs = 16;

std::vector<kvcache::BlockHash> Prompt(int32_t seed, int blocks) {
  std::vector<int32_t> tokens;
  for (int i = 0; i < blocks * kBs; ++i) tokens.push_back(seed * 1000 + i);
  return kvcache::HashFullBlocks(
      kvcache::NamespaceHash({.model = "m", .adapter = "", .cache_salt = ""}, kBs), tokens, kBs);
}

PlacementRequest Request(const std::vector<kvcache::BlockHash>& hashes, absl::Time now = {}) {
  return {.block_hashes = hashes,
          .prompt_tokens = static_cast<int64_t>(hashes.size()) * kBs + 5,
          .now = now};
}

// `worker` holds all of `prompt`, as a snapshot says.
void Holds(KvIndex* index, WorkerId worker, const std::vector<kvcache::BlockHash>& prompt) {
  kvcache::KvSnapshot snap;
  snap.epoch = 1;
  snap.block_hashes.assign(prompt.begin(), prompt.end());
  std::sort(snap.block_hashes.begin(), snap.block_hashes.end());
  index->ApplySnapshot(worker, snap);
}

std::vector<WorkerView> Colocated(int n) {
  std::vector<WorkerView> ws(n);
  for (int i = 0; i < n; ++i) ws[i].id = i;
  return ws;
}

TEST(RoutingPolicyTest, UnknownNameSaysWhichFlagAndTheChoices) {
  auto p = MakeRoutingPolicy("fastest");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), HasSubstr("--policy"));
  EXPECT_THAT(p.status().message(), HasSubstr("sglang_cache_aware"));
  for (const std::string& name : RoutingPolicyNames()) {
    auto made = MakeRoutingPolicy(name);
    ASSERT_TRUE(made.ok()) << name;
    EXPECT_EQ((*made)->name(), name);
  }
}

TEST(RoutingPolicyTest, EveryPolicyRefusesAPoolWithNothingToServe) {
  std::vector<WorkerView> only_prefill(1);
  only_prefill[0].role = WorkerRole::kPrefill;
  for (const std::string& name : RoutingPolicyNames()) {
    auto p = *MakeRoutingPolicy(name);
    auto got = p->Place(Request(Prompt(1, 2)), PoolView{.workers = only_prefill});
    EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable) << name;
  }
}

TEST(RoutingPolicyTest, BatonGoesWhereThePrefixIsUnlessTheQueueThereCostsMore) {
  KvIndex index;
  const auto prompt = Prompt(1, 20);
  Holds(&index, 2, prompt);
  auto ws = Colocated(4);
  CostModel cost;
  auto policy = NewCostPolicy(cost);
  const PoolView pool{.workers = ws, .index = &index, .block_size = kBs};
  auto p = policy->Place(Request(prompt), pool);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->decode, 2);
  EXPECT_EQ(p->prefill, kNoWorker);
  EXPECT_EQ(p->expected_hit_tokens, 20 * kBs);
  // Worker 2 now has 10000 prompt tokens queued: recomputing 325 tokens elsewhere is faster.
  ws[2].queued_prefill_tokens = 10000;
  auto q = NewCostPolicy(cost)->Place(Request(prompt), pool);
  ASSERT_TRUE(q.ok());
  EXPECT_NE(q->decode, 2);
  EXPECT_EQ(q->expected_hit_tokens, 0);
}

TEST(RoutingPolicyTest, BatonSendsABurstOfANewPrefixToOneWorker) {
  auto ws = Colocated(8);
  auto policy = NewCostPolicy(CostModel{});
  std::set<WorkerId> homes;
  const absl::Time t0 = absl::FromUnixSeconds(100);
  for (int i = 0; i < 6; ++i) {
    auto p = policy->Place(Request(Prompt(7, 30), t0), PoolView{.workers = ws, .block_size = kBs});
    ASSERT_TRUE(p.ok());
    homes.insert(p->decode);
    ws[p->decode].queued_prefill_tokens += 5;  // only the uncached tail queues
    ws[p->decode].running += 1;
  }
  EXPECT_EQ(homes.size(), 1u);
  // Different new prefixes spread over the pool (the rendezvous tie-break).
  std::set<WorkerId> spread;
  auto fresh = NewCostPolicy(CostModel{});
  const auto idle = Colocated(8);
  for (int s = 0; s < 40; ++s) {
    spread.insert(fresh->Place(Request(Prompt(100 + s, 4), t0), PoolView{.workers = idle})->decode);
  }
  EXPECT_GE(spread.size(), 6u);
}

TEST(RoutingPolicyTest, BatonSplitPicksThePrefillByQueueAndTheDecodeHoldingThePrefix) {
  std::vector<WorkerView> ws(4);
  for (int i = 0; i < 4; ++i) {
    ws[i].id = i;
    ws[i].role = i < 2 ? WorkerRole::kPrefill : WorkerRole::kDecode;
  }
  ws[0].queued_prefill_tokens = 5000;
  const auto prompt = Prompt(3, 64);
  KvIndex index;
  Holds(&index, 3, prompt);  // the second decode worker holds the prompt: nothing crosses
  CostModel cost;
  cost.transfer_bytes_per_second = 1e8;
  auto p = NewCostPolicy(cost)->Place(Request(prompt),
                                      PoolView{.workers = ws, .index = &index, .block_size = kBs});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->prefill, 1);
  EXPECT_EQ(p->decode, 3);
}

TEST(RoutingPolicyTest, BatonKeepsASessionOnItsWorkerWithinTheStickiness) {
  auto ws = Colocated(4);
  auto policy = NewCostPolicy(CostModel{});
  const auto prompt = Prompt(9, 2);  // the request's span points into it
  PlacementRequest r = Request(prompt);
  r.session = 42;
  const WorkerId first = policy->Place(r, PoolView{.workers = ws})->decode;
  ws[first].running = 5;  // a little busier: 10 ms more, within 0.5 s
  r.block_hashes = {};
  EXPECT_EQ(policy->Place(r, PoolView{.workers = ws})->decode, first);
  ws[first].queued_prefill_tokens = 100000;  // 20 s more: the session moves
  EXPECT_NE(policy->Place(r, PoolView{.workers = ws})->decode, first);
}

TEST(RoutingPolicyTest, SglangFollowsItsThresholds) {
  auto ws = Colocated(3);
  SglangParams params;
  auto policy = NewSglangPolicy(params);
  const PoolView pool{.workers = ws, .block_size = kBs};
  // Empty trees: the smallest tree, the first worker.
  const auto a = Prompt(1, 10);
  EXPECT_EQ(policy->Place(Request(a), pool)->decode, 0);
  // Worker 0's tree now holds a; b is new: smallest tree (1, then 2).
  EXPECT_EQ(policy->Place(Request(Prompt(2, 10)), pool)->decode, 1);
  // a again: the match rate is 160/165 > 0.3, so worker 0 even when busier.
  ws[0].running = 60;
  EXPECT_EQ(policy->Place(Request(a), pool)->decode, 0);
  // Imbalanced past both thresholds (65 > 64 and 65 > 1.5 * 0): least loaded.
  ws[0].running = 65;
  ws[1].running = 3;
  EXPECT_EQ(policy->Place(Request(a), pool)->decode, 2);
  // A match covering less than 0.3 of the prompt (16 of 54 tokens): the smallest tree.
  ws = Colocated(3);
  std::vector<kvcache::BlockHash> part(a.begin(), a.begin() + 1);
  PlacementRequest low = Request(part);
  low.prompt_tokens = 54;  // 16/54 < 0.3
  auto fresh = NewSglangPolicy(params);
  ASSERT_TRUE(
      fresh->Place(Request(a), PoolView{.workers = ws, .block_size = kBs}).ok());  // tree 0 holds a
  EXPECT_EQ(fresh->Place(low, PoolView{.workers = ws, .block_size = kBs})->decode, 1);
}

TEST(RoutingPolicyTest, LoadBaselines) {
  auto ws = Colocated(3);
  const PoolView pool{.workers = ws};
  auto rr = NewRoundRobinPolicy();
  std::vector<WorkerId> got;
  for (int i = 0; i < 6; ++i) got.push_back(rr->Place(Request(Prompt(1, 1)), pool)->decode);
  EXPECT_EQ(got, (std::vector<WorkerId>{0, 1, 2, 0, 1, 2}));
  ws[0].running = 3;
  ws[1].running = 1;
  ws[2].running = 2;
  EXPECT_EQ(NewLeastLoadedPolicy()->Place(Request(Prompt(1, 1)), pool)->decode, 1);
  auto p2 = NewPowerOfTwoPolicy(11);
  for (int i = 0; i < 50; ++i) {
    EXPECT_NE(p2->Place(Request(Prompt(1, 1)), pool)->decode, 0) << "never the busiest of 3";
  }
}

}  // namespace
}  // namespace baton::routing
