// The workers one router serves from, and where each request runs (docs/disaggregation.md):
// on a colocated worker, or split between a prefill worker (which computes the prompt and
// writes its K/V into the decode worker's pages) and a decode worker (which streams the
// tokens). Colocated and split workers can be mixed: requests rotate over the colocated
// workers and the decode workers; a request that lands on a decode worker takes the next
// prefill worker, or prefills on the decode worker when there are none.
//
// Placement is a RoutingPolicy's (`--policy`, default Baton's cache-aware cost), over the
// workers that are healthy now, with the KV index the workers' event streams feed
// (docs/routing.md). The pool counts what it has in flight on each worker; a Route carries
// that count and gives it back when the request ends.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "baton/v1/trace.pb.h"
#include "dispatch/router_metrics.h"
#include "dispatch/worker_client.h"
#include "routing/kv_index.h"
#include "routing/routing_policy.h"

namespace baton::dispatch {

// What the router does when a Prefill call fails for a reason another worker might not
// have (the prefill worker died, the transfer broke).
enum class PrefillFailover {
  kRetry,  // once on another prefill worker, then on the decode worker itself
  kLocal,  // on the decode worker itself
  kNone,   // the request fails
};

// "retry", "local" or "none"; InvalidArgument naming the flag otherwise.
absl::StatusOr<PrefillFailover> ParsePrefillFailover(std::string_view name);

class WorkerPool;
class KvEventFeed;

// One request's share of the pool's load counts: in flight on its serving worker, and its
// uncached prompt tokens queued on the worker computing them until PromptDone.
class RouteLoad {
 public:
  RouteLoad(WorkerPool* pool, routing::WorkerId serving, routing::WorkerId computing,
            int64_t queued_tokens);
  ~RouteLoad();
  RouteLoad(const RouteLoad&) = delete;
  RouteLoad& operator=(const RouteLoad&) = delete;
  // The prompt is computed (the first token, or the prefill leg, is back). Idempotent.
  void PromptDone();
  WorkerPool* pool() const { return pool_; }

 private:
  WorkerPool* pool_;
  routing::WorkerId serving_, computing_;
  int64_t queued_;
  std::atomic<bool> prompt_done_{false};
};

// Where one request runs.
struct Route {
  Route() = default;
  Route(WorkerClient* worker) : decode(worker) {}  // NOLINT: a colocated route
  // Streams the tokens; computes the prompt too when `prefill` is null.
  WorkerClient* decode = nullptr;
  WorkerClient* prefill = nullptr;
  const WorkerPool* pool = nullptr;  // for failover; null: no retry on another worker
  std::shared_ptr<RouteLoad> load;   // null for routes made by hand (tests)
  // How it was placed, for the request's latency breakdown and log.
  std::string_view policy;             // the policy's name; empty for routes made by hand
  int64_t expected_cached_tokens = 0;  // the prompt tokens the placement expected cached
  double route_seconds = 0;            // hashing the prompt's blocks and placing it
  // Pick(..., explain): every candidate as the policy weighed it (docs/inspector.md).
  std::shared_ptr<const baton::v1::RouteTrace> explanation;
  // Call when the prompt is computed; safe on any route.
  void PromptDone() const {
    if (load != nullptr) load->PromptDone();
  }
};

struct PoolOptions {
  PrefillFailover failover = PrefillFailover::kRetry;
  std::string policy = "baton";  // RoutingPolicyNames()
  routing::CostModel cost;
  // Follow the workers' KV event streams; off: the index remembers what it sent where.
  bool kv_events = true;
  absl::Duration approximate_ttl = absl::Minutes(2);
  // Health checks and stats polls (KV usage) of every worker.
  absl::Duration poll_interval = absl::Seconds(1);
  // Requests in flight on one serving worker beyond which it takes no more; when every
  // healthy worker is there, Pick is ResourceExhausted (HTTP 429). 0: no limit.
  int64_t max_inflight_per_worker = 512;
  // A worker marked down after a failed request stays out at least this long, even if
  // its health check passes (a circuit breaker: a flapping worker is not retried at once).
  absl::Duration down_for = absl::Seconds(5);
  // How often `dns:` entries are resolved again (a Kubernetes headless Service lists its
  // ready pods' addresses).
  absl::Duration dns_interval = absl::Seconds(10);
  // Split routes for prompts of at most this many tokens skip the prefill worker: the
  // decode worker computes them itself, as Dynamo's conditional disaggregation does,
  // since a short prompt costs the decode worker little and the transfer buys nothing.
  // 0: every split route prefills remotely.
  int64_t max_local_prefill_tokens = 0;
  // Split requests open the decode stream together with the Prefill call (the decode
  // worker waits for the transfer: await_kv_transfer_ms). Off: only once the Prefill
  // answered, one router round trip later, for decode workers that predate the wait.
  bool decode_with_prefill = true;
  // How many times a stream whose decode worker becomes unreachable after it began is
  // continued on another worker (RequestRun::Migrate). 0: never.
  int migration_limit = 1;
  // What the router presents to workers (--internal-token-file, mTLS).
  std::shared_ptr<const service::InternalAuth> auth = service::InternalAuth::Open();
  // Resolves a host name to addresses; null: getaddrinfo. Tests replace it.
  std::function<std::vector<std::string>(const std::string& host)> resolve;
};

// "host:port" targets of a `dns:HOST:PORT` entry, one per address HOST resolves to now
// (IPv6 in brackets), sorted; empty when it does not resolve.
std::vector<std::string> ResolveTargets(const std::string& host, int port,
                                        const PoolOptions& options);

// After `failed.decode` could not be reached, before it sent anything: marks that worker
// down and places the request again (on the workers still healthy). Unavailable when the
// route was made by hand (no pool) or nothing else can serve.
absl::StatusOr<Route> RerouteAfterFailure(const Route& failed, std::span<const int32_t> prompt_ids,
                                          std::string_view cache_salt, std::string_view session);

class WorkerPool {
 public:
  // Comma-separated lists of host:port, or dns:HOST:PORT for every address HOST resolves
  // to (re-resolved every dns_interval: workers join and leave with the name). At least
  // one colocated or decode entry. `metrics` (may be null) must outlive the pool.
  static absl::StatusOr<std::unique_ptr<WorkerPool>> Create(std::string_view colocated,
                                                            std::string_view prefill,
                                                            std::string_view decode,
                                                            const PoolOptions& options,
                                                            RouterMetrics* metrics = nullptr);
  ~WorkerPool();

  // Starts the health poller and the KV event feeds, once the model's block hash
  // namespace is known (the primary worker's GetModelInfo).
  void Start(std::string model_id, int64_t block_size);

  // Where a request with this prompt runs. Unavailable when no healthy worker can serve.
  // `session` (the client's prompt_cache_key; empty: none) keeps a conversation on one
  // worker while that costs little (the policy's session affinity). `explain`: fill
  // Route::explanation.
  absl::StatusOr<Route> Pick(std::span<const int32_t> prompt_ids, std::string_view cache_salt,
                             std::string_view session = {}, bool explain = false);
  // A prefill worker other than `failed`, or null when there is none.
  WorkerClient* OtherPrefill(const WorkerClient* failed) const;
  PrefillFailover failover() const { return failover_; }
  bool decode_with_prefill() const { return options_.decode_with_prefill; }
  int migration_limit() const { return options_.migration_limit; }
  // A worker that can answer for the model (GetModelInfo, readiness): the first colocated
  // or decode worker.
  WorkerClient* primary() const;
  RouterMetrics* metrics() const { return metrics_; }
  const routing::KvIndex& index() const { return *index_; }
  std::string_view policy_name() const { return policy_->name(); }
  // The workers the pool knows now (those that left a DNS name stay, marked gone).
  size_t size() const { return count_.load(std::memory_order_acquire); }
  const std::string& target(routing::WorkerId id) const { return slots_[id]->client->target(); }
  bool healthy(routing::WorkerId id) const { return slots_[id]->state.healthy.load(); }
  bool gone(routing::WorkerId id) const { return slots_[id]->state.gone.load(); }
  // Whether some healthy worker can serve a request now (a colocated or decode worker that
  // the health poller admits): what /ready answers.
  bool CanRoute() const;
  // Resolves the dns: entries again now (the poller does it every dns_interval).
  void Refresh();
  // Marks a worker down now (a request failed against it); the poller re-admits it.
  void MarkDown(const WorkerClient* worker);

 private:
  friend class RouteLoad;
  // The router's live view of one worker.
  struct State {
    routing::WorkerRole role = routing::WorkerRole::kColocated;
    std::atomic<bool> healthy{true};         // until the first poll says otherwise
    std::atomic<int64_t> down_until_ns{0};   // MarkDown: not re-admitted before this
    std::atomic<bool> model_checked{false};  // GetModelInfo matched the pool's model
    std::atomic<bool> model_refused{false};  // it did not (logged once)
    std::atomic<int64_t> in_flight{0};
    std::atomic<int64_t> queued_tokens{0};
    std::atomic<int64_t> kv_total{0};
    std::atomic<int64_t> kv_used{0};
    std::atomic<bool> gone{false};  // its DNS name no longer lists it
  };
  struct Slot {
    std::unique_ptr<WorkerClient> client;
    State state;
    int source = -1;  // index into sources_; -1: a static entry
  };
  // One comma-separated entry: a fixed address or a DNS name.
  struct Source {
    routing::WorkerRole role = routing::WorkerRole::kColocated;
    std::string host;  // dns: entries
    int port = 0;
  };

  WorkerPool() = default;
  absl::Status AddEntries(std::string_view list, routing::WorkerRole role);
  // Appends a worker; slots are never moved or freed while the pool lives, so readers
  // index [0, size()) without a lock. Only the constructor and Refresh call it.
  routing::WorkerId Add(const std::string& target, routing::WorkerRole role, int source);
  State& state(size_t i) const { return slots_[i]->state; }
  WorkerClient* client(size_t i) const { return slots_[i]->client.get(); }
  // Route::explanation for a placement.
  std::shared_ptr<const baton::v1::RouteTrace> Explain(const routing::PlacementRequest& request,
                                                       std::span<const routing::WorkerView> views,
                                                       const routing::Placement& placement,
                                                       const Route& route) const;
  void PollLoop();
  void PollOnce();
  // Whether worker i serves the pool's model, block size and hash spec (logs why not).
  bool CheckModel(size_t i, absl::Duration timeout);

  std::unique_ptr<std::unique_ptr<Slot>[]> slots_;  // kMaxIndexedWorkers of them
  std::atomic<size_t> count_{0};
  std::vector<Source> sources_;
  std::mutex refresh_mu_;  // one Refresh at a time
  absl::Time next_refresh_;
  PrefillFailover failover_ = PrefillFailover::kRetry;
  PoolOptions options_;
  RouterMetrics* metrics_ = nullptr;
  std::unique_ptr<routing::RoutingPolicy> policy_;
  std::unique_ptr<routing::KvIndex> index_;
  std::string model_id_;
  int64_t block_size_ = 0;
  std::unique_ptr<KvEventFeed> feed_;
  std::mutex poll_mu_;
  std::condition_variable poll_cv_;
  bool stopping_ = false;
  std::thread poller_;
};

}  // namespace baton::dispatch
