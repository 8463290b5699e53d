// sglang_cache_aware: the SGLang router's cache-aware policy, as its documentation and
// source comments describe it, on Baton's workers.
//
//   - The pool is imbalanced when (max load - min load) > balance_abs_threshold and
//     max load > balance_rel_threshold * min load, load being the requests the router has
//     in flight on a worker. Then the request goes to the least loaded worker.
//   - Otherwise it goes to the worker whose approximate tree matches the longest prefix,
//     if the match covers more than cache_threshold of the prompt; else to the worker with
//     the smallest tree (the most cache room, by the router's guess).
//   - Either way the prompt is inserted into the chosen worker's tree. The tree learns only
//     from what the router sent: it never hears of an eviction.
//
// Differences, written down: SGLang's tree is over characters of the text and Baton's
// approximation is over full KV blocks of the token ids, so a match is counted in whole
// blocks; SGLang prunes a tree past max_tree_size (2^26 characters by default) from its
// least recently used leaves, and so does this one past `max_tree_blocks` (2^20 blocks,
// the same size at about 4 characters a token). With split workers the policy chooses
// the prefill worker this way and the decode worker by least load.
#include <algorithm>
#include <memory>

#include "routing/routing_policy.h"

namespace baton::routing {
namespace {

using policy_util::Sides;

class SglangPolicy final : public RoutingPolicy {
 public:
  explicit SglangPolicy(const SglangParams& p) : params_(p), tree_(p.tree_ttl, p.max_tree_blocks) {}
  std::string_view name() const override { return "sglang_cache_aware"; }

  absl::StatusOr<Placement> Place(const PlacementRequest& request, const PoolView& pool) override {
    const Sides sides = policy_util::SplitPool(pool);
    if (sides.serving.empty()) return policy_util::NoWorker();
    const bool split = !sides.prefill.empty();
    const std::vector<const WorkerView*>& computing = split ? sides.prefill : sides.serving;
    const WorkerView* chosen = CacheAware(request, pool, computing);
    tree_.Remember(chosen->id, request.block_hashes, request.now);
    if (!split) return policy_util::Finish(pool, request, sides, chosen, nullptr);
    const WorkerView* decode = *std::min_element(
        sides.serving.begin(), sides.serving.end(),
        [](const WorkerView* a, const WorkerView* b) { return a->running < b->running; });
    return policy_util::Finish(pool, request, sides, decode, chosen);
  }

 private:
  const WorkerView* CacheAware(const PlacementRequest& request, const PoolView& pool,
                               const std::vector<const WorkerView*>& ws) {
    auto by_load = [](const WorkerView* a, const WorkerView* b) { return a->running < b->running; };
    const auto [lo, hi] = std::minmax_element(ws.begin(), ws.end(), by_load);
    const int64_t min_load = (*lo)->running, max_load = (*hi)->running;
    if (max_load - min_load > params_.balance_abs_threshold &&
        static_cast<double>(max_load) > params_.balance_rel_threshold * min_load) {
      return *lo;
    }
    std::vector<PrefixMatch> matches;
    tree_.MatchPrefix(request.block_hashes, &matches);
    const WorkerView* best = nullptr;
    int64_t best_blocks = 0;
    for (const PrefixMatch& m : matches) {
      for (const WorkerView* w : ws) {
        if (w->id == m.worker && m.blocks > best_blocks) {
          best = w;
          best_blocks = m.blocks;
        }
      }
    }
    const double rate = request.prompt_tokens == 0
                            ? 0.0
                            : static_cast<double>(best_blocks * pool.block_size) /
                                  static_cast<double>(request.prompt_tokens);
    if (best != nullptr && rate > params_.cache_threshold) return best;
    return *std::min_element(ws.begin(), ws.end(),
                             [this](const WorkerView* a, const WorkerView* b) {
                               return tree_.worker_blocks(a->id) < tree_.worker_blocks(b->id);
                             });
  }

  const SglangParams params_;
  KvIndex tree_;  // approximate: what this router sent where
};

}  // namespace

std::unique_ptr<RoutingPolicy> NewSglangPolicy(const SglangParams& params) {
  return std::make_unique<SglangPolicy>(params);
}

}  // namespace baton::routing
