#include "routing/routing_policy.h"

#include <algorithm>

#include "absl/strings/str_join.h"
#include "common/strings.h"

namespace baton::routing {
namespace policy_util {

Sides SplitPool(const PoolView& pool) {
  Sides s;
  for (const WorkerView& w : pool.workers) {
    (w.role == WorkerRole::kPrefill ? s.prefill : s.serving).push_back(&w);
  }
  return s;
}

int64_t HitTokens(int64_t blocks, int64_t block_size, int64_t prompt_tokens) {
  return std::clamp<int64_t>(blocks * block_size, 0, std::max<int64_t>(prompt_tokens - 1, 0));
}

int64_t IndexedBlocks(const PoolView& pool, const PlacementRequest& request, WorkerId worker) {
  if (pool.index == nullptr) return 0;
  std::vector<PrefixMatch> matches;
  pool.index->MatchPrefix(request.block_hashes, &matches);
  for (const PrefixMatch& m : matches) {
    if (m.worker == worker) return m.blocks;
  }
  return 0;
}

Placement Finish(const PoolView& pool, const PlacementRequest& request, const Sides& sides,
                 const WorkerView* serving, const WorkerView* prefill) {
  Placement p;
  p.decode = serving->id;
  if (serving->role == WorkerRole::kDecode && prefill != nullptr && !sides.prefill.empty()) {
    p.prefill = prefill->id;
  }
  const WorkerId computes = p.prefill != kNoWorker ? p.prefill : p.decode;
  p.expected_hit_tokens =
      HitTokens(IndexedBlocks(pool, request, computes), pool.block_size, request.prompt_tokens);
  return p;
}

absl::Status NoWorker() {
  return absl::UnavailableError(
      "no healthy worker can serve the request; check the workers' health (baton_router_"
      "worker_healthy) and retry");
}

}  // namespace policy_util

std::vector<std::string> RoutingPolicyNames() {
  return {"baton", "round_robin", "least_loaded", "power_of_two", "sglang_cache_aware"};
}

absl::StatusOr<std::unique_ptr<RoutingPolicy>> MakeRoutingPolicy(std::string_view name,
                                                                 const CostModel& cost,
                                                                 const SglangParams& sglang) {
  if (name == "baton") return NewCostPolicy(cost);
  if (name == "round_robin") return NewRoundRobinPolicy();
  if (name == "least_loaded") return NewLeastLoadedPolicy();
  if (name == "power_of_two") return NewPowerOfTwoPolicy();
  if (name == "sglang_cache_aware") return NewSglangPolicy(sglang);
  return absl::InvalidArgumentError(StrCat("--policy: unknown policy '", name, "'; choose one of ",
                                           absl::StrJoin(RoutingPolicyNames(), ", ")));
}

}  // namespace baton::routing
