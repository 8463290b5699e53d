// baton: places each request where its estimated time to first token is lowest.
//
// For a worker that computes the prompt, the estimate is the prompt tokens queued ahead of
// it plus its own uncached tokens, at the worker's rate, plus what its running sequences
// add to each step. A decode worker adds the KV bytes that must cross to it (less the
// prefix it already holds) and the same running-sequence term. A worker with its KV pool
// nearly full costs steeply more: it would preempt.
//
// The cached prefix comes from the KV index (the workers' own events), and from what this
// policy placed in the last `pending_ttl`: events arrive only after a prompt is computed,
// and a burst of one new prefix should land on one worker, not on all of them.
//
// Equal costs (an idle pool, a prefix nobody holds) are broken by a rendezvous hash of the
// prompt's first block and the worker, so that a new prefix has one home across requests
// and across routers.
#include <algorithm>
#include <limits>
#include <mutex>

#include "absl/container/flat_hash_map.h"
#include "routing/routing_policy.h"

namespace baton::routing {
namespace {

using policy_util::Sides;

uint64_t Mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  return x ^ (x >> 33);
}

class CostPolicy final : public RoutingPolicy {
 public:
  explicit CostPolicy(const CostModel& c) : c_(c), pending_(c.pending_ttl) {}
  std::string_view name() const override { return "baton"; }

  absl::StatusOr<Placement> Place(const PlacementRequest& request, const PoolView& pool) override {
    const Sides sides = policy_util::SplitPool(pool);
    if (sides.serving.empty()) return policy_util::NoWorker();
    Cached(request, pool);
    const uint64_t key = TieKey(request);

    // Colocated workers, and decode workers computing their own prompts when the pool has
    // no prefill worker.
    Choice best;
    const bool split = !sides.prefill.empty();
    std::vector<CandidateCost> explained;
    auto explain = [&](const WorkerView& w, double prefill, double decode, double transfer) {
      if (!request.explain) return;
      explained.push_back({.worker = w.id,
                           .cached_tokens = policy_util::HitTokens(
                               CachedBlocks(w.id), pool.block_size, request.prompt_tokens),
                           .prefill_seconds = prefill,
                           .decode_seconds = decode,
                           .transfer_seconds = transfer,
                           .cost_seconds = prefill + decode + transfer});
    };
    for (const WorkerView* w : sides.serving) {
      if (split && w->role == WorkerRole::kDecode) continue;
      const double prefill = PrefillCost(*w, request, pool);
      const double decode = DecodeCost(*w);
      explain(*w, prefill, decode, 0);
      Consider(&best, prefill + decode, w, nullptr, key);
    }
    if (split) {
      Choice p;
      for (const WorkerView* w : sides.prefill) {
        const double prefill = PrefillCost(*w, request, pool);
        explain(*w, prefill, 0, 0);
        Consider(&p, prefill, nullptr, w, key);
      }
      Choice d;
      const int64_t blocks = static_cast<int64_t>(request.block_hashes.size());
      for (const WorkerView* w : sides.serving) {
        if (w->role != WorkerRole::kDecode) continue;
        const double bytes =
            static_cast<double>(blocks - CachedBlocks(w->id)) * c_.kv_bytes_per_block;
        const double decode = DecodeCost(*w);
        const double transfer = bytes / c_.transfer_bytes_per_second;
        explain(*w, 0, decode, transfer);
        Consider(&d, decode + transfer, w, nullptr, key);
      }
      if (d.serving != nullptr) {
        Consider(&best, p.cost + d.cost, d.serving, p.prefill, key);
      }
    }
    if (best.serving == nullptr) return policy_util::NoWorker();
    const WorkerView* serving = best.serving;
    const WorkerView* prefill = best.prefill;
    Sticky(request, sides, &serving, &prefill, best.cost, pool);

    Placement placement;
    placement.decode = serving->id;
    placement.prefill = prefill != nullptr ? prefill->id : kNoWorker;
    const WorkerId computes = prefill != nullptr ? prefill->id : serving->id;
    placement.expected_hit_tokens =
        policy_util::HitTokens(CachedBlocks(computes), pool.block_size, request.prompt_tokens);
    placement.candidates = std::move(explained);
    pending_.Remember(computes, request.block_hashes, request.now);
    if (prefill != nullptr) pending_.Remember(serving->id, request.block_hashes, request.now);
    return placement;
  }

 private:
  struct Choice {
    double cost = std::numeric_limits<double>::infinity();
    uint64_t tie = 0;
    const WorkerView* serving = nullptr;
    const WorkerView* prefill = nullptr;
  };

  static void Consider(Choice* best, double cost, const WorkerView* serving,
                       const WorkerView* prefill, uint64_t key) {
    const WorkerView* w = serving != nullptr ? serving : prefill;
    const uint64_t tie = Mix(key ^ Mix(static_cast<uint64_t>(w->id) + 1));
    if (cost < best->cost || (cost == best->cost && tie > best->tie)) {
      *best = {cost, tie, serving, prefill};
    }
  }

  static uint64_t TieKey(const PlacementRequest& r) {
    if (r.session != 0) return r.session;
    if (r.block_hashes.empty()) return 0;
    uint64_t k = 0;
    for (int i = 0; i < 8; ++i) k = (k << 8) | r.block_hashes[0].bytes[i];
    return k;
  }

  // Fills cached_: per worker, the leading blocks of the prompt it holds or will hold.
  void Cached(const PlacementRequest& request, const PoolView& pool) {
    cached_.clear();
    std::vector<PrefixMatch> m;
    if (pool.index != nullptr) {
      pool.index->MatchPrefix(request.block_hashes, &m);
      for (const PrefixMatch& x : m) cached_[x.worker] = x.blocks;
    }
    pending_.MatchPrefix(request.block_hashes, &m);
    for (const PrefixMatch& x : m) cached_[x.worker] = std::max(cached_[x.worker], x.blocks);
  }
  int64_t CachedBlocks(WorkerId w) const {
    auto it = cached_.find(w);
    return it == cached_.end() ? 0 : it->second;
  }

  double PrefillCost(const WorkerView& w, const PlacementRequest& r, const PoolView& pool) const {
    const int64_t hit =
        policy_util::HitTokens(CachedBlocks(w.id), pool.block_size, r.prompt_tokens);
    const double uncached = static_cast<double>(r.prompt_tokens - hit);
    const double tokens =
        static_cast<double>(w.queued_prefill_tokens) + uncached * (1.0 + c_.recompute_weight);
    double cost = tokens * c_.prefill_seconds_per_token;
    if (w.role != WorkerRole::kPrefill)
      cost += static_cast<double>(w.running) * c_.seconds_per_running;
    return cost;
  }

  double DecodeCost(const WorkerView& w) const {
    double cost = w.role == WorkerRole::kDecode
                      ? static_cast<double>(w.running) * c_.seconds_per_running
                      : 0.0;
    if (w.kv_blocks_total > 0) {
      const double used =
          static_cast<double>(w.kv_blocks_used) / static_cast<double>(w.kv_blocks_total);
      // Past the threshold every further percent costs a second: preemption recomputes.
      if (used > c_.kv_pressure_threshold) cost += (used - c_.kv_pressure_threshold) * 100.0;
    }
    return cost;
  }

  // A session keeps the worker that computes its prompts unless that costs
  // session_stickiness_seconds more than the best.
  void Sticky(const PlacementRequest& r, const Sides& sides, const WorkerView** serving,
              const WorkerView** prefill, double best_cost, const PoolView& pool) {
    if (r.session == 0) return;
    auto it = sessions_.find(r.session);
    if (it != sessions_.end()) {
      if (*prefill != nullptr) {
        const double now_cost = PrefillCost(**prefill, r, pool);
        for (const WorkerView* w : sides.prefill) {
          if (w->id == it->second &&
              PrefillCost(*w, r, pool) <= now_cost + c_.session_stickiness_seconds) {
            *prefill = w;
            return;
          }
        }
      } else {
        for (const WorkerView* w : sides.serving) {
          if (w->id == it->second && PrefillCost(*w, r, pool) + DecodeCost(*w) <=
                                         best_cost + c_.session_stickiness_seconds) {
            *serving = w;
            return;
          }
        }
      }
    }
    if (sessions_.size() > kMaxSessions) sessions_.clear();  // a crude bound: affinity is a hint
    sessions_[r.session] = (*prefill != nullptr ? *prefill : *serving)->id;
  }

  static constexpr size_t kMaxSessions = 1 << 20;
  const CostModel c_;
  KvIndex pending_;
  // Scratch for one Place call. LockedCostPolicy serializes Place.
  absl::flat_hash_map<WorkerId, int64_t> cached_;
  absl::flat_hash_map<uint64_t, WorkerId> sessions_;
};

// Place keeps per-call scratch state; one lock makes it safe from many threads (a
// decision takes microseconds).
class LockedCostPolicy final : public RoutingPolicy {
 public:
  explicit LockedCostPolicy(const CostModel& c) : inner_(c) {}
  std::string_view name() const override { return inner_.name(); }
  absl::StatusOr<Placement> Place(const PlacementRequest& request, const PoolView& pool) override {
    std::lock_guard<std::mutex> lock(mu_);
    return inner_.Place(request, pool);
  }

 private:
  std::mutex mu_;
  CostPolicy inner_;
};

}  // namespace

std::unique_ptr<RoutingPolicy> NewCostPolicy(const CostModel& cost) {
  return std::make_unique<LockedCostPolicy>(cost);
}

}  // namespace baton::routing
