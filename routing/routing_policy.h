// Where a request runs: the placement policies the router chooses from (`--policy`), and
// the view of the pool they decide on (docs/routing.md).
//
//   BATON_ASSIGN_OR_RETURN(auto policy, MakeRoutingPolicy("baton", CostModel{}));
//   BATON_ASSIGN_OR_RETURN(Placement p, policy->Place(request, pool));
//
// A policy sees only numbers (the workers' roles, the router's count of what it has in
// flight on each, the KV index), never sockets, so that the routing simulator in bench/
// drives the very code the router runs. Place is called from many threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kvcache/block_hash.h"
#include "routing/kv_index.h"

namespace baton::routing {

enum class WorkerRole { kColocated, kPrefill, kDecode };

// What the router knows about one worker when it places a request.
struct WorkerView {
  WorkerId id = 0;
  WorkerRole role = WorkerRole::kColocated;
  // Requests this router has streaming from the worker (decode legs, colocated requests).
  int64_t running = 0;
  // Prompt tokens this router sent the worker to compute that it has not finished yet
  // (the uncached part of each prompt it computes).
  int64_t queued_prefill_tokens = 0;
  // KV pages: the worker's capacity and how many are in use (last stats poll); 0: unknown.
  int64_t kv_blocks_total = 0;
  int64_t kv_blocks_used = 0;
};

struct PlacementRequest {
  std::span<const kvcache::BlockHash> block_hashes;  // the prompt's full blocks
  int64_t prompt_tokens = 0;
  // Session affinity key (a hash of the client's session id); 0: none.
  uint64_t session = 0;
  absl::Time now;
  // Fill Placement::candidates (a traced request: docs/inspector.md).
  bool explain = false;
};

// One worker as a policy weighed it, for a traced request. Policies without a cost model
// leave the cost terms 0.
struct CandidateCost {
  WorkerId worker = 0;
  int64_t cached_tokens = 0;  // prompt tokens the policy expects it holds
  double prefill_seconds = 0;
  double decode_seconds = 0;
  double transfer_seconds = 0;
  double cost_seconds = 0;  // what the policy compared
};

inline constexpr WorkerId kNoWorker = -1;

struct Placement {
  WorkerId decode = kNoWorker;   // streams the tokens: a colocated or a decode worker
  WorkerId prefill = kNoWorker;  // computes the prompt; kNoWorker: `decode` computes it
  // Prompt tokens the policy expects the computing worker to find cached.
  int64_t expected_hit_tokens = 0;
  std::vector<CandidateCost> candidates;  // PlacementRequest::explain only
};

// The healthy workers a request may go to. A pool has colocated or decode workers (at
// least one), and may have prefill workers.
struct PoolView {
  std::span<const WorkerView> workers;
  const KvIndex* index = nullptr;  // may be null (no index: no cache awareness)
  int64_t block_size = 16;
};

// Baton's cost model: estimated seconds until the first token, for one placement. The
// defaults are the 135M model on this project's 2-vCPU CI machine (docs/routing.md says
// how to calibrate them with `baton bench`).
struct CostModel {
  double prefill_seconds_per_token = 2.0e-4;
  // The cluster pays for every token recomputed, not only this request: the uncached
  // tokens count this many times more (1: twice) so that a hit is not thrown away to gain
  // a little queueing time.
  double recompute_weight = 1.0;
  // What each running sequence adds to a colocated worker's time to compute a prompt
  // (its decode steps share the batch).
  double seconds_per_running = 2.0e-3;
  // KV bytes per block on the wire, and the link's rate, for the transfer term.
  double kv_bytes_per_block = 16 * 30 * 2 * 3 * 64 * 2;
  double transfer_bytes_per_second = 1.0e9;
  // Above this share of its pages in use a worker is close to preempting: its cost
  // grows steeply.
  double kv_pressure_threshold = 0.9;
  // How long a placement counts as cached on its worker before the worker's events say so
  // (a burst of one new prefix then lands on one worker instead of all of them).
  absl::Duration pending_ttl = absl::Seconds(30);
  // Session affinity: a session stays on its worker unless that costs this much more.
  double session_stickiness_seconds = 0.5;
};

// SGLang's router cache_aware policy (sgl-router, documented defaults as the issue fixes
// them).
struct SglangParams {
  double cache_threshold = 0.3;
  int64_t balance_abs_threshold = 64;
  double balance_rel_threshold = 1.5;
  absl::Duration tree_ttl = absl::InfiniteDuration();  // SGLang prunes by size, not age
  // SGLang's max_tree_size is 2^26 characters per worker; at about 4 characters a token
  // and 16 tokens a block, that is 2^20 blocks.
  int64_t max_tree_blocks = int64_t{1} << 20;
};

class RoutingPolicy {
 public:
  virtual ~RoutingPolicy() = default;
  virtual std::string_view name() const = 0;
  // Unavailable when the pool has no worker that can serve.
  virtual absl::StatusOr<Placement> Place(const PlacementRequest& request,
                                          const PoolView& pool) = 0;
};

// The names `--policy` accepts, Baton's own first (the default).
std::vector<std::string> RoutingPolicyNames();
// InvalidArgument naming --policy and the choices for an unknown name.
absl::StatusOr<std::unique_ptr<RoutingPolicy>> MakeRoutingPolicy(std::string_view name,
                                                                 const CostModel& cost = {},
                                                                 const SglangParams& sglang = {});

// The policies, for tests and the simulator; MakeRoutingPolicy is the usual way in.
std::unique_ptr<RoutingPolicy> NewCostPolicy(const CostModel& cost);
std::unique_ptr<RoutingPolicy> NewRoundRobinPolicy();
std::unique_ptr<RoutingPolicy> NewLeastLoadedPolicy();
std::unique_ptr<RoutingPolicy> NewPowerOfTwoPolicy(uint64_t seed = 1);
std::unique_ptr<RoutingPolicy> NewSglangPolicy(const SglangParams& params);

// Shared by the policies.
namespace policy_util {

// The pool split by what a worker can do: stream tokens (colocated and decode workers) or
// only compute prompts (prefill workers).
struct Sides {
  std::vector<const WorkerView*> serving;
  std::vector<const WorkerView*> prefill;
};
Sides SplitPool(const PoolView& pool);

// Prompt tokens a worker holding `blocks` leading blocks skips: never the last token,
// which the worker computes to sample the first output.
int64_t HitTokens(int64_t blocks, int64_t block_size, int64_t prompt_tokens);

// The worker's leading cached blocks of the request, per the index (0 without one).
int64_t IndexedBlocks(const PoolView& pool, const PlacementRequest& request, WorkerId worker);

// Completes a placement on `serving`: a decode worker takes a prefill worker from
// `pick_prefill` when the pool has any; expected hits come from the index.
Placement Finish(const PoolView& pool, const PlacementRequest& request, const Sides& sides,
                 const WorkerView* serving, const WorkerView* prefill);

absl::Status NoWorker();

}  // namespace policy_util

}  // namespace baton::routing
