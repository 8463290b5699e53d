// The load-only baselines: round_robin, least_loaded, power_of_two. None of them looks at
// the KV index to choose; they report the hits the index expects where they land.
#include <atomic>
#include <mutex>
#include <random>

#include "routing/routing_policy.h"

namespace baton::routing {
namespace {

using policy_util::Sides;

class RoundRobinPolicy final : public RoutingPolicy {
 public:
  std::string_view name() const override { return "round_robin"; }
  absl::StatusOr<Placement> Place(const PlacementRequest& request, const PoolView& pool) override {
    const Sides sides = policy_util::SplitPool(pool);
    if (sides.serving.empty()) return policy_util::NoWorker();
    const WorkerView* serving = sides.serving[next_serving_.fetch_add(1) % sides.serving.size()];
    const WorkerView* prefill =
        sides.prefill.empty() ? nullptr
                              : sides.prefill[next_prefill_.fetch_add(1) % sides.prefill.size()];
    return policy_util::Finish(pool, request, sides, serving, prefill);
  }

 private:
  std::atomic<uint64_t> next_serving_{0};
  std::atomic<uint64_t> next_prefill_{0};
};

// The load a baseline compares: requests in flight, then queued prompt tokens.
bool LessLoaded(const WorkerView* a, const WorkerView* b) {
  if (a->running != b->running) return a->running < b->running;
  return a->queued_prefill_tokens < b->queued_prefill_tokens;
}

class LeastLoadedPolicy final : public RoutingPolicy {
 public:
  std::string_view name() const override { return "least_loaded"; }
  absl::StatusOr<Placement> Place(const PlacementRequest& request, const PoolView& pool) override {
    const Sides sides = policy_util::SplitPool(pool);
    if (sides.serving.empty()) return policy_util::NoWorker();
    // Ties rotate, so that an idle pool is not filled from its first worker.
    const uint64_t start = next_.fetch_add(1);
    return policy_util::Finish(pool, request, sides, Least(sides.serving, start),
                               sides.prefill.empty() ? nullptr : Least(sides.prefill, start));
  }

 private:
  static const WorkerView* Least(const std::vector<const WorkerView*>& ws, uint64_t start) {
    const WorkerView* best = nullptr;
    for (size_t i = 0; i < ws.size(); ++i) {
      const WorkerView* w = ws[(start + i) % ws.size()];
      if (best == nullptr || LessLoaded(w, best)) best = w;
    }
    return best;
  }
  std::atomic<uint64_t> next_{0};
};

class PowerOfTwoPolicy final : public RoutingPolicy {
 public:
  explicit PowerOfTwoPolicy(uint64_t seed) : rng_(seed) {}
  std::string_view name() const override { return "power_of_two"; }
  absl::StatusOr<Placement> Place(const PlacementRequest& request, const PoolView& pool) override {
    const Sides sides = policy_util::SplitPool(pool);
    if (sides.serving.empty()) return policy_util::NoWorker();
    return policy_util::Finish(pool, request, sides, TwoChoices(sides.serving),
                               sides.prefill.empty() ? nullptr : TwoChoices(sides.prefill));
  }

 private:
  const WorkerView* TwoChoices(const std::vector<const WorkerView*>& ws) {
    if (ws.size() == 1) return ws[0];
    size_t a = 0, b = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      a = rng_() % ws.size();
      b = rng_() % (ws.size() - 1);
    }
    if (b >= a) ++b;  // two distinct workers
    return LessLoaded(ws[b], ws[a]) ? ws[b] : ws[a];
  }
  std::mutex mu_;
  std::mt19937_64 rng_;
};

}  // namespace

std::unique_ptr<RoutingPolicy> NewRoundRobinPolicy() {
  return std::make_unique<RoundRobinPolicy>();
}
std::unique_ptr<RoutingPolicy> NewLeastLoadedPolicy() {
  return std::make_unique<LeastLoadedPolicy>();
}
std::unique_ptr<RoutingPolicy> NewPowerOfTwoPolicy(uint64_t seed) {
  return std::make_unique<PowerOfTwoPolicy>(seed);
}

}  // namespace baton::routing
