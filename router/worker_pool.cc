#include "router/worker_pool.h"

#include <algorithm>

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
  for (size_t i = 0; i < all_.size(); ++i) {
    State& st = *states_[i];
    const bool ok = all_[i]->CheckHealth(timeout).ok();
    if (ok) {
      absl::StatusOr<baton::internal::v1::GetStatsResponse> stats = all_[i]->GetStats(timeout);
      if (stats.ok()) {
        st.kv_total.store(stats->pages_total());
        st.kv_used.store(stats->pages_used());
      }
    }
    st.healthy.store(ok);
    if (metrics_ != nullptr) metrics_->SetWorkerHealthy(all_[i]->target(), ok);
  }
  if (metrics_ != nullptr) {
    metrics_->SetIndex(index_->num_blocks(), index_->num_entries(), index_->MemoryBytes());
  }
}

void WorkerPool::MarkDown(const WorkerClient* worker) {
  for (size_t i = 0; i < all_.size(); ++i) {
    if (all_[i].get() != worker) continue;
    states_[i]->healthy.store(false);
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
  for (size_t i = 0; i < all_.size(); ++i) {
    const State& st = *states_[i];
    if (!st.healthy.load()) continue;
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
  BATON_ASSIGN_OR_RETURN(
      Placement p,
      policy_->Place(request, PoolView{.workers = views,
                                       .index = index_.get(),
                                       .block_size = block_size_ > 0 ? block_size_ : 16}));
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
