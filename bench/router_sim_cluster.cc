#include "bench/router_sim_cluster.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <memory>
#include <queue>

#include "absl/container/flat_hash_set.h"
#include "common/check.h"
#include "kvcache/block_hash.h"
#include "kvcache/block_manager.h"
#include "kvcache/kv_events.h"
#include "routing/kv_index.h"

namespace baton::bench {
namespace {

using kvcache::BlockHash;
using routing::WorkerId;

struct Req {
  SimPrompt p;
  double arrival = 0;
  std::vector<BlockHash> hashes;  // the prompt's full blocks
  WorkerId worker = 0;
  int64_t expected_hit = 0;
  int64_t queued = 0;  // what this request added to its worker's queued prefill tokens
  int64_t hit = 0;
  double first_token = -1;
  double finish = -1;
};

struct Seq {
  Req* r = nullptr;
  std::vector<int32_t> blocks;
  int64_t cached_blocks = 0;
  int64_t computed = 0;  // prompt tokens whose K/V exist
  int64_t generated = 0;
};

struct Worker {
  std::unique_ptr<kvcache::KvEventPublisher> events;
  std::unique_ptr<kvcache::BlockManager> blocks;
  std::deque<Req*> waiting;
  std::vector<Seq> running;
  bool busy = false;
  std::vector<std::pair<size_t, int64_t>> plan_prefill;  // running index, tokens
  std::vector<size_t> plan_decode;
  // The router's view: what it has in flight here.
  int64_t in_flight = 0;
  int64_t queued_tokens = 0;
};

enum class EvType { kArrival, kStepDone, kDeliver };

struct Ev {
  double t = 0;
  uint64_t order = 0;
  EvType type = EvType::kArrival;
  int worker = 0;
  Req* req = nullptr;
  std::shared_ptr<const kvcache::KvEventBatch> batch;
};

struct Later {
  bool operator()(const Ev& a, const Ev& b) const {
    return a.t != b.t ? a.t > b.t : a.order > b.order;
  }
};

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  return v[i];
}

class Sim {
 public:
  Sim(const ClusterShape& shape, routing::RoutingPolicy* policy, uint64_t seed)
      : shape_(shape),
        policy_(policy),
        seed_(seed),
        index_(absl::Minutes(2)),
        root_(kvcache::NamespaceHash({.model = "sim", .adapter = "", .cache_salt = ""},
                                     shape.block_size)),
        workers_(shape.workers) {
    for (int w = 0; w < shape.workers; ++w) {
      Worker& wk = workers_[w];
      wk.events = std::make_unique<kvcache::KvEventPublisher>(shape.block_size, 1000 + w);
      wk.blocks = std::make_unique<kvcache::BlockManager>(shape.kv_blocks, true, wk.events.get());
      wk.events->Subscribe([this, w](const kvcache::KvEventBatch& b) { OnEvents(w, b); });
      if (shape.events) index_.ApplySnapshot(w, wk.events->Snapshot());
    }
  }

  SimResult Run(const std::vector<SimPrompt>& prompts, int max_turns) {
    max_turns_ = max_turns;
    for (const SimPrompt& p : prompts) Push(p.arrival, EvType::kArrival, 0, New(p, p.arrival));
    while (!queue_.empty()) {
      Ev e = queue_.top();
      queue_.pop();
      now_ = e.t;
      switch (e.type) {
        case EvType::kArrival:
          Arrive(e.req);
          break;
        case EvType::kStepDone:
          FinishStep(e.worker);
          break;
        case EvType::kDeliver:
          if (index_.ApplyBatch(e.worker, *e.batch) == routing::KvIndex::Applied::kNeedsSnapshot) {
            index_.ApplySnapshot(e.worker, workers_[e.worker].events->Snapshot());
          }
          break;
      }
    }
    return Summarize();
  }

 private:
  Req* New(const SimPrompt& p, double arrival) {
    auto r = std::make_unique<Req>();
    r->p = p;
    r->arrival = arrival;
    r->hashes = kvcache::HashFullBlocks(root_, r->p.tokens, shape_.block_size);
    reqs_.push_back(std::move(r));
    return reqs_.back().get();
  }

  void Push(double t, EvType type, int worker, Req* req,
            std::shared_ptr<const kvcache::KvEventBatch> batch = nullptr) {
    queue_.push({t, order_++, type, worker, req, std::move(batch)});
  }

  absl::Time Now() const { return absl::FromUnixSeconds(1'000'000) + absl::Seconds(now_); }

  void OnEvents(int w, const kvcache::KvEventBatch& b) {
    for (const auto& e : b.events) {
      if (e.type == kvcache::KvEvent::Type::kBlockRemoved) {
        evicted_ += static_cast<int64_t>(e.block_hashes.size());
      }
    }
    if (!shape_.events) return;
    Push(now_ + shape_.event_lag_seconds, EvType::kDeliver, w, nullptr,
         std::make_shared<kvcache::KvEventBatch>(b));
  }

  void Arrive(Req* r) {
    views_.resize(workers_.size());
    for (size_t i = 0; i < workers_.size(); ++i) {
      const Worker& wk = workers_[i];
      views_[i] = {.id = static_cast<WorkerId>(i),
                   .role = routing::WorkerRole::kColocated,
                   .running = wk.in_flight,
                   .queued_prefill_tokens = wk.queued_tokens,
                   .kv_blocks_total = wk.blocks->num_blocks(),
                   .kv_blocks_used = wk.blocks->num_in_use()};
    }
    const int64_t prompt = static_cast<int64_t>(r->p.tokens.size());
    routing::PlacementRequest pr{.block_hashes = r->hashes, .prompt_tokens = prompt, .now = Now()};
    const routing::PoolView pool{
        .workers = views_, .index = &index_, .block_size = shape_.block_size};
    const auto t0 = std::chrono::steady_clock::now();
    absl::StatusOr<routing::Placement> placed = policy_->Place(pr, pool);
    decide_us_.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    BATON_CHECK(placed.ok());
    r->worker = placed->decode;
    r->expected_hit = placed->expected_hit_tokens;
    r->queued = prompt - r->expected_hit;
    Worker& wk = workers_[r->worker];
    ++wk.in_flight;
    wk.queued_tokens += r->queued;
    if (!shape_.events) index_.Remember(r->worker, r->hashes, Now());
    wk.waiting.push_back(r);
    if (!wk.busy) StartStep(r->worker);
  }

  // Admits what fits (first come, first served), plans one step and schedules its end.
  void StartStep(int w) {
    Worker& wk = workers_[w];
    const int64_t bs = shape_.block_size;
    while (!wk.waiting.empty() && static_cast<int>(wk.running.size()) < shape_.step.max_running) {
      Req* r = wk.waiting.front();
      const int64_t prompt = static_cast<int64_t>(r->p.tokens.size());
      const int64_t total = (prompt + r->p.output_tokens + bs - 1) / bs;
      const int64_t cached = std::min(wk.blocks->CountCachedPrefix(r->hashes), (prompt - 1) / bs);
      const int64_t room = wk.blocks->num_available() - wk.blocks->CountIdle(r->hashes, cached);
      if (room < total - cached) {
        if (wk.running.empty()) {  // can never fit: dropped, like a request over the limit
          wk.waiting.pop_front();
          ++dropped_;
          Done(r, w);
          continue;
        }
        break;
      }
      wk.waiting.pop_front();
      Seq s;
      s.r = r;
      s.blocks = wk.blocks->AcquireCached(r->hashes, cached);
      for (int64_t i = cached; i < total; ++i) {
        absl::StatusOr<int32_t> b = wk.blocks->Allocate();
        BATON_CHECK(b.ok());
        s.blocks.push_back(*b);
      }
      s.cached_blocks = cached;
      s.computed = cached * bs;
      r->hit = cached * bs;
      wk.blocks->CountLookup(prompt, r->hit);
      wk.running.push_back(std::move(s));
    }
    wk.plan_prefill.clear();
    wk.plan_decode.clear();
    int64_t budget = shape_.step.token_budget, prefill = 0;
    for (size_t i = 0; i < wk.running.size(); ++i) {
      const Seq& s = wk.running[i];
      const int64_t prompt = static_cast<int64_t>(s.r->p.tokens.size());
      if (s.computed < prompt) {
        const int64_t take = std::min(prompt - s.computed, budget);
        if (take > 0) {
          wk.plan_prefill.push_back({i, take});
          budget -= take;
          prefill += take;
        }
      } else {
        wk.plan_decode.push_back(i);
      }
    }
    wk.blocks->Flush();
    if (wk.plan_prefill.empty() && wk.plan_decode.empty()) return;
    wk.busy = true;
    const double dur = shape_.step.step_seconds +
                       static_cast<double>(prefill) * shape_.step.prefill_token_seconds +
                       static_cast<double>(wk.plan_decode.size()) * shape_.step.decode_seq_seconds;
    Push(now_ + dur, EvType::kStepDone, w, nullptr);
  }

  void FinishStep(int w) {
    Worker& wk = workers_[w];
    const int64_t bs = shape_.block_size;
    for (const auto& [i, take] : wk.plan_prefill) {
      Seq& s = wk.running[i];
      s.computed += take;
      const int64_t prompt = static_cast<int64_t>(s.r->p.tokens.size());
      if (s.computed < prompt) continue;
      s.r->first_token = now_;
      s.generated = 1;
      wk.queued_tokens -= s.r->queued;
      const int64_t full = prompt / bs;
      for (int64_t b = s.cached_blocks; b < full; ++b) {
        wk.blocks->Store(s.blocks[b], s.r->hashes[b], b == 0 ? root_ : s.r->hashes[b - 1],
                         std::span(s.r->p.tokens).subspan(b * bs, bs));
      }
    }
    for (size_t i : wk.plan_decode) ++wk.running[i].generated;
    // Finished sequences cache the answer's full blocks (the engine fills them as it
    // decodes) and release their pages last to first.
    std::vector<Seq> still;
    for (Seq& s : wk.running) {
      if (s.generated < s.r->p.output_tokens || s.r->first_token < 0) {
        still.push_back(std::move(s));
        continue;
      }
      std::vector<int32_t> all = s.r->p.tokens;
      const std::vector<int32_t> answer = AnswerTokens(s.r->p);
      all.insert(all.end(), answer.begin(), answer.end());
      const auto hashes = kvcache::HashFullBlocks(root_, all, bs);
      for (size_t b = s.r->hashes.size(); b < hashes.size() && b < s.blocks.size(); ++b) {
        wk.blocks->Store(s.blocks[b], hashes[b], b == 0 ? root_ : hashes[b - 1],
                         std::span(all).subspan(b * bs, bs));
      }
      for (auto it = s.blocks.rbegin(); it != s.blocks.rend(); ++it) wk.blocks->Release(*it);
      Done(s.r, w);
      if (s.r->p.session >= 0) {
        SimPrompt next = NextTurn(s.r->p, answer, max_turns_, seed_);
        if (!next.tokens.empty()) {
          const double at = now_ + next.arrival;
          Push(at, EvType::kArrival, 0, New(next, at));
        }
      }
    }
    wk.running = std::move(still);
    wk.busy = false;
    StartStep(w);  // also flushes this step's events
  }

  void Done(Req* r, int w) {
    r->finish = now_;
    --workers_[w].in_flight;
    if (r->first_token < 0) workers_[w].queued_tokens -= r->queued;
  }

  SimResult Summarize() const {
    SimResult out;
    out.policy = std::string(policy_->name());
    std::vector<double> ttft;
    double first = 1e300, last = 0;
    for (const auto& r : reqs_) {
      if (r->first_token < 0) continue;
      ++out.requests;
      out.prompt_tokens += static_cast<int64_t>(r->p.tokens.size());
      out.hit_tokens += r->hit;
      out.expected_hits += r->expected_hit;
      out.output_tokens += r->p.output_tokens;
      ttft.push_back(r->first_token - r->arrival);
      first = std::min(first, r->arrival);
      last = std::max(last, r->finish);
    }
    out.makespan_seconds = last > first ? last - first : 0;
    out.ttft_p50 = Percentile(ttft, 0.5);
    out.ttft_p99 = Percentile(ttft, 0.99);
    out.decide_p50_us = Percentile(decide_us_, 0.5);
    out.decide_p99_us = Percentile(decide_us_, 0.99);
    out.evicted_blocks = evicted_;
    out.ceiling_hit_rate = CeilingHitRate();
    out.index_blocks = index_.num_blocks();
    return out;
  }

  // The hit rate with one infinite cache: the prompt's leading blocks that any earlier
  // request (prompt or answer) produced. No placement can do better.
  double CeilingHitRate() const {
    std::vector<const Req*> order;
    for (const auto& r : reqs_) {
      if (r->first_token >= 0) order.push_back(r.get());
    }
    std::sort(order.begin(), order.end(),
              [](const Req* a, const Req* b) { return a->arrival < b->arrival; });
    absl::flat_hash_set<BlockHash> seen;
    int64_t hit = 0, total = 0;
    const int64_t bs = shape_.block_size;
    for (const Req* r : order) {
      const int64_t prompt = static_cast<int64_t>(r->p.tokens.size());
      int64_t n = 0;
      while (n < static_cast<int64_t>(r->hashes.size()) && seen.contains(r->hashes[n])) ++n;
      hit += std::min(n * bs, prompt - 1);
      total += prompt;
      std::vector<int32_t> all = r->p.tokens;
      const std::vector<int32_t> answer = AnswerTokens(r->p);
      all.insert(all.end(), answer.begin(), answer.end());
      for (const BlockHash& h : kvcache::HashFullBlocks(root_, all, bs)) seen.insert(h);
    }
    return total == 0 ? 0.0 : static_cast<double>(hit) / static_cast<double>(total);
  }

  const ClusterShape shape_;
  routing::RoutingPolicy* policy_;
  const uint64_t seed_;
  routing::KvIndex index_;
  const BlockHash root_;
  std::vector<Worker> workers_;
  std::vector<routing::WorkerView> views_;
  std::priority_queue<Ev, std::vector<Ev>, Later> queue_;
  std::vector<std::unique_ptr<Req>> reqs_;
  std::vector<double> decide_us_;
  double now_ = 0;
  uint64_t order_ = 0;
  int max_turns_ = 1;
  int64_t evicted_ = 0;
  int64_t dropped_ = 0;
};

}  // namespace

SimResult RunCluster(const ClusterShape& shape, const std::vector<SimPrompt>& prompts,
                     int max_turns, routing::RoutingPolicy* policy, uint64_t seed) {
  Sim sim(shape, policy, seed);
  return sim.Run(prompts, max_turns);
}

}  // namespace baton::bench
