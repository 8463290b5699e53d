#include "router/worker_pool.h"

#include <algorithm>
#include <cstdio>

#include "common/status.h"
#include "common/strings.h"
#include "kvcache/block_hash.h"
#include "router/kv_event_feed.h"

namespace baton::router {
namespace {

std::vector<std::string> SplitList(std::string_view list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string_view::npos) comma = list.size();
    std::string_view item = list.substr(start, comma - start);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (!item.empty()) out.emplace_back(item);
    start = comma + 1;
  }
  return out;
}

}  // namespace

absl::StatusOr<PrefillFailover> ParsePrefillFailover(std::string_view name) {
  if (name == "retry") return PrefillFailover::kRetry;
  if (name == "local") return PrefillFailover::kLocal;
  if (name == "none") return PrefillFailover::kNone;
  return absl::InvalidArgumentError(
      StrCat("--prefill-failover is '", name, "'; it must be retry, local or none"));
}

absl::StatusOr<std::unique_ptr<WorkerPool>> WorkerPool::Create(std::string_view colocated,
                                                               std::string_view prefill,
                                                               std::string_view decode,
                                                               const PoolOptions& options,
                                                               RouterMetrics* metrics) {
  std::unique_ptr<WorkerPool> pool(new WorkerPool());
  pool->options_ = options;
  pool->failover_ = options.failover;
  pool->metrics_ = metrics;
  BATON_ASSIGN_OR_RETURN(pool->policy_, MakeRoutingPolicy(options.policy, options.cost));
  pool->index_ = std::make_unique<KvIndex>(options.approximate_ttl);
  for (const std::string& t : SplitList(colocated)) pool->Add(t, WorkerRole::kColocated);
  for (const std::string& t : SplitList(decode)) pool->Add(t, WorkerRole::kDecode);
  for (const std::string& t : SplitList(prefill)) pool->Add(t, WorkerRole::kPrefill);
  if (pool->all_.size() == pool->prefill_.size()) {
    return absl::InvalidArgumentError(
        "no worker to serve from: give --worker (colocated) or --decode-worker (with "
        "--prefill-worker), each a comma-separated list of host:port");
  }
  if (static_cast<int64_t>(pool->all_.size()) > kMaxIndexedWorkers) {
    return absl::InvalidArgumentError(StrCat("too many workers (", pool->all_.size(),
                                             "); a router serves at most ", kMaxIndexedWorkers));
  }
  return pool;
}

void WorkerPool::Add(const std::string& target, WorkerRole role) {
  all_.push_back(std::make_unique<WorkerClient>(target));
  auto state = std::make_unique<State>();
  state->role = role;
  states_.push_back(std::move(state));
  if (role == WorkerRole::kPrefill) prefill_.push_back(all_.back().get());
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(poll_mu_);
    stopping_ = true;
  }
  poll_cv_.notify_all();
  if (poller_.joinable()) poller_.join();
  feed_.reset();
}

void WorkerPool::Start(std::string model_id, int64_t block_size) {
  model_id_ = std::move(model_id);
  block_size_ = block_size;
  if (options_.kv_events) {
    feed_ = std::make_unique<KvEventFeed>(index_.get(), metrics_);
    for (size_t i = 0; i < all_.size(); ++i) feed_->Add(static_cast<WorkerId>(i), all_[i].get());
  }
  PollOnce();
  poller_ = std::thread([this] { PollLoop(); });
}

void WorkerPool::PollLoop() {
  std::unique_lock<std::mutex> lock(poll_mu_);
  while (!poll_cv_.wait_for(lock, absl::ToChronoMilliseconds(options_.poll_interval),
                            [this] { return stopping_; })) {
    lock.unlock();
    PollOnce();
    lock.lock();
  }
}

void WorkerPool::PollOnce() {
  const absl::Duration timeout = std::max(options_.poll_interval / 2, absl::Milliseconds(200));
  const int64_t now_ns = absl::ToUnixNanos(absl::Now());
  for (size_t i = 0; i < all_.size(); ++i) {
    State& st = *states_[i];
    bool ok = all_[i]->CheckHealth(timeout).ok() && now_ns >= st.down_until_ns.load();
    if (ok && !st.model_checked.load()) ok = CheckModel(i, timeout);
    if (ok) {
      absl::StatusOr<baton::internal::v1::GetStatsResponse> stats = all_[i]->GetStats(timeout);
      if (stats.ok()) {
        st.kv_total.store(stats->pages_total());
        st.kv_used.store(stats->pages_used());
      }
    }
    if (st.healthy.exchange(ok) != ok) {
      std::fprintf(stderr, "baton-router: worker %s is %s\n", all_[i]->target().c_str(),
                   ok ? "back" : "down; routing around it");
    }
    if (metrics_ != nullptr) metrics_->SetWorkerHealthy(all_[i]->target(), ok);
  }
  if (metrics_ != nullptr) {
    metrics_->SetIndex(index_->num_blocks(), index_->num_entries(), index_->MemoryBytes());
  }
}

bool WorkerPool::CheckModel(size_t i, absl::Duration timeout) {
  if (block_size_ == 0) return true;  // not started: nothing to compare with
  absl::StatusOr<baton::internal::v1::GetModelInfoResponse> info = all_[i]->GetModelInfo(timeout);
  if (!info.ok()) return false;
  if (info->model_id() != model_id_ || info->block_size() != block_size_ ||
      info->block_hash_spec_version() != static_cast<uint32_t>(kvcache::kBlockHashSpecVersion)) {
    // Blocks hashed for another model or block size would never match: refuse the worker
    // (and say so once, not at every poll).
    if (states_[i]->model_refused.exchange(true)) return false;
    std::fprintf(stderr,
                 "baton-router: worker %s serves model '%s' with block size %lld (hash spec %u); "
                 "this pool serves '%s' with %lld (spec %d). Not routing to it; restart it "
                 "with the pool's model and --block-size\n",
                 all_[i]->target().c_str(), info->model_id().c_str(),
                 static_cast<long long>(info->block_size()), info->block_hash_spec_version(),
                 model_id_.c_str(), static_cast<long long>(block_size_),
                 kvcache::kBlockHashSpecVersion);
    return false;
  }
  states_[i]->model_checked.store(true);
  return true;
}

void WorkerPool::MarkDown(const WorkerClient* worker) {
  for (size_t i = 0; i < all_.size(); ++i) {
    if (all_[i].get() != worker) continue;
    states_[i]->healthy.store(false);
    states_[i]->down_until_ns.store(absl::ToUnixNanos(absl::Now() + options_.down_for));
    if (metrics_ != nullptr) metrics_->SetWorkerHealthy(worker->target(), false);
  }
}

absl::StatusOr<Route> WorkerPool::Pick(std::span<const int32_t> prompt_ids,
                                       std::string_view cache_salt) {
  std::vector<kvcache::BlockHash> hashes;
  if (block_size_ > 0) {
    const kvcache::BlockHash root = kvcache::NamespaceHash(
        {.model = model_id_, .adapter = "", .cache_salt = std::string(cache_salt)}, block_size_);
    hashes = kvcache::HashFullBlocks(root, prompt_ids, block_size_);
  }
  std::vector<WorkerView> views;
  views.reserve(all_.size());
  bool at_limit = false;
  for (size_t i = 0; i < all_.size(); ++i) {
    const State& st = *states_[i];
    if (!st.healthy.load()) continue;
    if (options_.max_inflight_per_worker > 0 && st.role != WorkerRole::kPrefill &&
        st.in_flight.load() >= options_.max_inflight_per_worker) {
      at_limit = true;
      continue;
    }
    views.push_back({.id = static_cast<WorkerId>(i),
                     .role = st.role,
                     .running = st.in_flight.load(),
                     .queued_prefill_tokens = st.queued_tokens.load(),
                     .kv_blocks_total = st.kv_total.load(),
                     .kv_blocks_used = st.kv_used.load()});
  }
  const absl::Time now = absl::Now();
  if (!options_.kv_events) index_->Expire(now);
  const PlacementRequest request{.block_hashes = hashes,
                                 .prompt_tokens = static_cast<int64_t>(prompt_ids.size()),
                                 .session = 0,
                                 .now = now};
  absl::StatusOr<Placement> placed =
      policy_->Place(request, PoolView{.workers = views,
                                       .index = index_.get(),
                                       .block_size = block_size_ > 0 ? block_size_ : 16});
  if (!placed.ok() && at_limit) {
    return absl::ResourceExhaustedError(
        StrCat("every worker has --max-inflight-per-worker=", options_.max_inflight_per_worker,
               " requests in flight; retry after a second, or add workers"));
  }
  BATON_RETURN_IF_ERROR(placed.status());
  const Placement& p = *placed;
  Route route(all_[p.decode].get());
  const WorkerId computing = p.prefill != kNoWorker ? p.prefill : p.decode;
  if (p.prefill != kNoWorker) {
    route.prefill = all_[p.prefill].get();
    route.pool = this;
  }
  route.load = std::make_shared<RouteLoad>(
      this, p.decode, computing, static_cast<int64_t>(prompt_ids.size()) - p.expected_hit_tokens);
  if (!options_.kv_events) {
    index_->Remember(computing, hashes, now);
    if (computing != p.decode) index_->Remember(p.decode, hashes, now);
  }
  if (metrics_ != nullptr) {
    metrics_->CountDecision(policy_->name(), all_[p.decode]->target());
    if (route.prefill != nullptr) metrics_->CountDecision(policy_->name(), route.prefill->target());
    metrics_->AddExpectedHitTokens(p.expected_hit_tokens);
  }
  return route;
}

WorkerClient* WorkerPool::OtherPrefill(const WorkerClient* failed) const {
  for (size_t i = 0; i < all_.size(); ++i) {
    WorkerClient* w = all_[i].get();
    if (w != failed && states_[i]->role == WorkerRole::kPrefill && states_[i]->healthy.load()) {
      return w;
    }
  }
  return nullptr;
}

WorkerClient* WorkerPool::primary() const {
  for (size_t i = 0; i < all_.size(); ++i) {
    if (states_[i]->role != WorkerRole::kPrefill) return all_[i].get();
  }
  return nullptr;
}

absl::StatusOr<Route> RerouteAfterFailure(const Route& failed, std::span<const int32_t> prompt_ids,
                                          std::string_view cache_salt) {
  WorkerPool* pool = failed.load != nullptr ? failed.load->pool() : nullptr;
  if (pool == nullptr || failed.decode == nullptr) {
    return absl::UnavailableError("no other worker to retry on");
  }
  pool->MarkDown(failed.decode);
  BATON_ASSIGN_OR_RETURN(Route next, pool->Pick(prompt_ids, cache_salt));
  if (pool->metrics() != nullptr) pool->metrics()->CountReroute();
  return next;
}

RouteLoad::RouteLoad(WorkerPool* pool, WorkerId serving, WorkerId computing, int64_t queued_tokens)
    : pool_(pool), serving_(serving), computing_(computing), queued_(queued_tokens) {
  pool_->states_[serving_]->in_flight.fetch_add(1);
  pool_->states_[computing_]->queued_tokens.fetch_add(queued_);
}

RouteLoad::~RouteLoad() {
  PromptDone();
  pool_->states_[serving_]->in_flight.fetch_sub(1);
}

void RouteLoad::PromptDone() {
  if (!prompt_done_.exchange(true)) pool_->states_[computing_]->queued_tokens.fetch_sub(queued_);
}

}  // namespace baton::router
