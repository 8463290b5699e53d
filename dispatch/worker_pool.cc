#include "dispatch/worker_pool.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "absl/strings/numbers.h"
#include "common/log.h"
#include "common/status.h"
#include "common/strings.h"
#include "dispatch/kv_event_feed.h"
#include "kvcache/block_hash.h"

namespace baton::dispatch {
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

// The policy's session key: 64-bit FNV-1a, stable across processes so that two routers
// break ties for a session the same way; 0 means none.
uint64_t SessionKey(std::string_view session) {
  if (session.empty()) return 0;
  uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : session) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h == 0 ? 1 : h;
}

}  // namespace

absl::StatusOr<PrefillFailover> ParsePrefillFailover(std::string_view name) {
  if (name == "retry") return PrefillFailover::kRetry;
  if (name == "local") return PrefillFailover::kLocal;
  if (name == "none") return PrefillFailover::kNone;
  return absl::InvalidArgumentError(
      StrCat("--prefill-failover is '", name, "'; it must be retry, local or none"));
}

std::vector<std::string> ResolveTargets(const std::string& host, int port,
                                        const PoolOptions& options) {
  std::vector<std::string> addresses;
  if (options.resolve) {
    addresses = options.resolve(host);
  } else {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (getaddrinfo(host.c_str(), nullptr, &hints, &found) == 0) {
      for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
        char text[INET6_ADDRSTRLEN] = {};
        const void* raw =
            a->ai_family == AF_INET
                ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr)
                : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr);
        if (inet_ntop(a->ai_family, raw, text, sizeof(text)) == nullptr) continue;
        addresses.push_back(a->ai_family == AF_INET6 ? StrCat("[", text, "]") : text);
      }
      freeaddrinfo(found);
    }
  }
  std::vector<std::string> targets;
  targets.reserve(addresses.size());
  for (const std::string& a : addresses) targets.push_back(StrCat(a, ":", port));
  std::sort(targets.begin(), targets.end());
  targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
  return targets;
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
  BATON_ASSIGN_OR_RETURN(pool->policy_, routing::MakeRoutingPolicy(options.policy, options.cost));
  pool->index_ = std::make_unique<routing::KvIndex>(options.approximate_ttl);
  pool->slots_ = std::make_unique<std::unique_ptr<Slot>[]>(routing::kMaxIndexedWorkers);
  BATON_RETURN_IF_ERROR(pool->AddEntries(colocated, routing::WorkerRole::kColocated));
  BATON_RETURN_IF_ERROR(pool->AddEntries(decode, routing::WorkerRole::kDecode));
  BATON_RETURN_IF_ERROR(pool->AddEntries(prefill, routing::WorkerRole::kPrefill));
  bool serving = false;
  for (const Source& src : pool->sources_) serving |= src.role != routing::WorkerRole::kPrefill;
  for (size_t i = 0; i < pool->size(); ++i)
    serving |= pool->state(i).role != routing::WorkerRole::kPrefill;
  if (!serving) {  // checked before resolving: this is the flags' mistake, not DNS's
    return absl::InvalidArgumentError(
        "no worker to serve from: give --worker (colocated) or --decode-worker (with "
        "--prefill-worker), each a comma-separated list of host:port or dns:HOST:PORT");
  }
  pool->Refresh();
  if (pool->primary() == nullptr) {
    return absl::UnavailableError(
        "no colocated or decode worker: every dns: entry resolved to no address yet; check "
        "the Service name, or start the router once its workers are ready");
  }
  return pool;
}

absl::Status WorkerPool::AddEntries(std::string_view list, routing::WorkerRole role) {
  for (const std::string& entry : SplitList(list)) {
    if (entry.rfind("dns:", 0) != 0) {
      if (Add(entry, role, -1) == routing::kNoWorker) {
        return absl::InvalidArgumentError(
            StrCat("too many workers; a router serves at most ", routing::kMaxIndexedWorkers));
      }
      continue;
    }
    const std::string name = entry.substr(4);
    const size_t colon = name.rfind(':');
    int port = 0;
    if (colon == std::string::npos || colon == 0 ||
        !absl::SimpleAtoi(name.substr(colon + 1), &port) || port < 1 || port > 65535) {
      return absl::InvalidArgumentError(
          StrCat("worker entry '", entry, "' must be dns:HOST:PORT with a port in [1, 65535]"));
    }
    sources_.push_back({role, name.substr(0, colon), port});
  }
  return absl::OkStatus();
}

routing::WorkerId WorkerPool::Add(const std::string& target, routing::WorkerRole role, int source) {
  const size_t n = count_.load(std::memory_order_relaxed);
  if (n >= static_cast<size_t>(routing::kMaxIndexedWorkers)) return routing::kNoWorker;
  auto slot = std::make_unique<Slot>();
  slot->client = std::make_unique<WorkerClient>(target, options_.auth);
  slot->state.role = role;
  slot->source = source;
  slots_[n] = std::move(slot);
  count_.store(n + 1, std::memory_order_release);  // publishes the slot to readers
  if (feed_ != nullptr) feed_->Add(static_cast<routing::WorkerId>(n), slots_[n]->client.get());
  return static_cast<routing::WorkerId>(n);
}

void WorkerPool::Refresh() {
  std::lock_guard<std::mutex> lock(refresh_mu_);
  next_refresh_ = absl::Now() + options_.dns_interval;
  for (size_t s = 0; s < sources_.size(); ++s) {
    const Source& src = sources_[s];
    const std::vector<std::string> now = ResolveTargets(src.host, src.port, options_);
    // Addresses that left the name are gone (their entries leave the index); those that
    // came back or are new serve again once their health check passes.
    for (size_t i = 0; i < size(); ++i) {
      if (slots_[i]->source != static_cast<int>(s)) continue;
      const bool listed = std::binary_search(now.begin(), now.end(), client(i)->target());
      if (state(i).gone.exchange(!listed) != !listed) {
        LogInfo("baton-router: worker %s %s %s", client(i)->target().c_str(),
                listed ? "is listed again by" : "left", src.host.c_str());
        if (!listed) index_->ForgetWorker(static_cast<routing::WorkerId>(i));
      }
    }
    for (const std::string& t : now) {
      bool known = false;
      for (size_t i = 0; i < size() && !known; ++i) {
        known = slots_[i]->source == static_cast<int>(s) && client(i)->target() == t;
      }
      if (known) continue;
      if (Add(t, src.role, static_cast<int>(s)) == routing::kNoWorker) {
        LogWarn("baton-router: %s lists more workers than the %d a router serves", src.host.c_str(),
                routing::kMaxIndexedWorkers);
        break;
      }
      LogInfo("baton-router: worker %s joined from %s", t.c_str(), src.host.c_str());
    }
  }
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
    for (size_t i = 0; i < size(); ++i) feed_->Add(static_cast<routing::WorkerId>(i), client(i));
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
  if (absl::Now() >= next_refresh_ && !sources_.empty()) Refresh();
  for (size_t i = 0; i < size(); ++i) {
    State& st = state(i);
    bool ok = !st.gone.load() && client(i)->CheckHealth(timeout).ok() &&
              now_ns >= st.down_until_ns.load();
    if (ok && !st.model_checked.load()) ok = CheckModel(i, timeout);
    if (ok) {
      absl::StatusOr<baton::internal::v1::GetStatsResponse> stats = client(i)->GetStats(timeout);
      if (stats.ok()) {
        st.kv_total.store(stats->pages_total());
        st.kv_used.store(stats->pages_used());
      }
    }
    if (st.healthy.exchange(ok) != ok) {
      LogWarn("baton-router: worker %s is %s", client(i)->target().c_str(),
              ok ? "back" : "down; routing around it");
    }
    if (metrics_ != nullptr) metrics_->SetWorkerHealthy(client(i)->target(), ok);
  }
  if (metrics_ != nullptr) {
    metrics_->SetIndex(index_->num_blocks(), index_->num_entries(), index_->MemoryBytes());
  }
}

bool WorkerPool::CheckModel(size_t i, absl::Duration timeout) {
  if (block_size_ == 0) return true;  // not started: nothing to compare with
  absl::StatusOr<baton::internal::v1::GetModelInfoResponse> info = client(i)->GetModelInfo(timeout);
  if (!info.ok()) return false;
  if (info->model_id() != model_id_ || info->block_size() != block_size_ ||
      info->block_hash_spec_version() != static_cast<uint32_t>(kvcache::kBlockHashSpecVersion)) {
    // Blocks hashed for another model or block size would never match: refuse the worker
    // (and say so once, not at every poll).
    if (state(i).model_refused.exchange(true)) return false;
    LogError(
        "baton-router: worker %s serves model '%s' with block size %lld (hash spec %u); "
        "this pool serves '%s' with %lld (spec %d). Not routing to it; restart it "
        "with the pool's model and --block-size",
        client(i)->target().c_str(), info->model_id().c_str(),
        static_cast<long long>(info->block_size()), info->block_hash_spec_version(),
        model_id_.c_str(), static_cast<long long>(block_size_), kvcache::kBlockHashSpecVersion);
    return false;
  }
  state(i).model_checked.store(true);
  return true;
}

void WorkerPool::MarkDown(const WorkerClient* worker) {
  for (size_t i = 0; i < size(); ++i) {
    if (client(i) != worker) continue;
    state(i).healthy.store(false);
    state(i).down_until_ns.store(absl::ToUnixNanos(absl::Now() + options_.down_for));
    if (metrics_ != nullptr) metrics_->SetWorkerHealthy(worker->target(), false);
  }
}

absl::StatusOr<Route> WorkerPool::Pick(std::span<const int32_t> prompt_ids,
                                       std::string_view cache_salt, std::string_view session,
                                       bool explain) {
  const auto started = std::chrono::steady_clock::now();
  std::vector<kvcache::BlockHash> hashes;
  if (block_size_ > 0) {
    const kvcache::BlockHash root = kvcache::NamespaceHash(
        {.model = model_id_, .adapter = "", .cache_salt = std::string(cache_salt)}, block_size_);
    hashes = kvcache::HashFullBlocks(root, prompt_ids, block_size_);
  }
  std::vector<routing::WorkerView> views;
  views.reserve(size());
  bool at_limit = false;
  for (size_t i = 0; i < size(); ++i) {
    const State& st = state(i);
    if (!st.healthy.load() || st.gone.load()) continue;
    if (options_.max_inflight_per_worker > 0 && st.role != routing::WorkerRole::kPrefill &&
        st.in_flight.load() >= options_.max_inflight_per_worker) {
      at_limit = true;
      continue;
    }
    views.push_back({.id = static_cast<routing::WorkerId>(i),
                     .role = st.role,
                     .running = st.in_flight.load(),
                     .queued_prefill_tokens = st.queued_tokens.load(),
                     .kv_blocks_total = st.kv_total.load(),
                     .kv_blocks_used = st.kv_used.load()});
  }
  const absl::Time now = absl::Now();
  if (!options_.kv_events) index_->Expire(now);
  const routing::PlacementRequest request{.block_hashes = hashes,
                                          .prompt_tokens = static_cast<int64_t>(prompt_ids.size()),
                                          .session = SessionKey(session),
                                          .now = now,
                                          .explain = explain};
  absl::StatusOr<routing::Placement> placed =
      policy_->Place(request, routing::PoolView{.workers = views,
                                                .index = index_.get(),
                                                .block_size = block_size_ > 0 ? block_size_ : 16});
  if (!placed.ok() && at_limit) {
    return absl::ResourceExhaustedError(
        StrCat("every worker has --max-inflight-per-worker=", options_.max_inflight_per_worker,
               " requests in flight; retry after a second, or add workers"));
  }
  BATON_RETURN_IF_ERROR(placed.status());
  routing::Placement p = *placed;
  if (p.prefill != routing::kNoWorker && options_.max_local_prefill_tokens > 0 &&
      static_cast<int64_t>(prompt_ids.size()) <= options_.max_local_prefill_tokens) {
    p.prefill = routing::kNoWorker;  // the decode worker computes it (Route.prefill stays null)
  }
  Route route(client(p.decode));
  const routing::WorkerId computing = p.prefill != routing::kNoWorker ? p.prefill : p.decode;
  if (p.prefill != routing::kNoWorker) {
    route.prefill = client(p.prefill);
    route.pool = this;
  }
  route.load = std::make_shared<RouteLoad>(
      this, p.decode, computing, static_cast<int64_t>(prompt_ids.size()) - p.expected_hit_tokens);
  if (!options_.kv_events) {
    index_->Remember(computing, hashes, now);
    if (computing != p.decode) index_->Remember(p.decode, hashes, now);
  }
  if (metrics_ != nullptr) {
    metrics_->CountDecision(policy_->name(), client(p.decode)->target());
    if (route.prefill != nullptr) metrics_->CountDecision(policy_->name(), route.prefill->target());
    metrics_->AddExpectedHitTokens(p.expected_hit_tokens);
  }
  route.policy = policy_->name();
  route.expected_cached_tokens = p.expected_hit_tokens;
  route.route_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (explain) route.explanation = Explain(request, views, p, route);
  return route;
}

std::shared_ptr<const baton::v1::RouteTrace> WorkerPool::Explain(
    const routing::PlacementRequest& request, std::span<const routing::WorkerView> views,
    const routing::Placement& placement, const Route& route) const {
  auto out = std::make_shared<baton::v1::RouteTrace>();
  out->set_policy(std::string(policy_->name()));
  out->set_decode_worker(route.decode->target());
  if (route.prefill != nullptr) out->set_prefill_worker(route.prefill->target());
  out->set_expected_cached_tokens(placement.expected_hit_tokens);
  out->set_route_seconds(route.route_seconds);
  const routing::PoolView pool{
      .workers = views, .index = index_.get(), .block_size = block_size_ > 0 ? block_size_ : 16};
  for (const routing::WorkerView& v : views) {
    baton::v1::RouteCandidate* c = out->add_candidates();
    c->set_worker(client(v.id)->target());
    c->set_role(v.role == routing::WorkerRole::kPrefill  ? "prefill"
                : v.role == routing::WorkerRole::kDecode ? "decode"
                                                         : "colocated");
    c->set_running(v.running);
    c->set_queued_prefill_tokens(v.queued_prefill_tokens);
    c->set_kv_usage(v.kv_blocks_total > 0 ? static_cast<double>(v.kv_blocks_used) /
                                                static_cast<double>(v.kv_blocks_total)
                                          : -1.0);
    // Policies without a cost model: what the index says the worker holds.
    c->set_cached_tokens(
        routing::policy_util::HitTokens(routing::policy_util::IndexedBlocks(pool, request, v.id),
                                        pool.block_size, request.prompt_tokens));
    for (const routing::CandidateCost& cost : placement.candidates) {
      if (cost.worker != v.id) continue;
      c->set_cached_tokens(cost.cached_tokens);
      c->set_prefill_cost_seconds(cost.prefill_seconds);
      c->set_decode_cost_seconds(cost.decode_seconds);
      c->set_transfer_cost_seconds(cost.transfer_seconds);
      c->set_cost_seconds(cost.cost_seconds);
    }
    c->set_chosen(v.id == placement.decode || v.id == placement.prefill);
  }
  return out;
}

WorkerClient* WorkerPool::OtherPrefill(const WorkerClient* failed) const {
  for (size_t i = 0; i < size(); ++i) {
    WorkerClient* w = client(i);
    if (w != failed && state(i).role == routing::WorkerRole::kPrefill && state(i).healthy.load()) {
      return w;
    }
  }
  return nullptr;
}

bool WorkerPool::CanRoute() const {
  const int64_t now_ns = absl::ToUnixNanos(absl::Now());
  for (size_t i = 0; i < size(); ++i) {
    const State& st = state(i);
    if (st.role != routing::WorkerRole::kPrefill && st.healthy.load() && !st.gone.load() &&
        now_ns >= st.down_until_ns.load()) {
      return true;
    }
  }
  return false;
}

WorkerClient* WorkerPool::primary() const {
  for (size_t i = 0; i < size(); ++i) {
    if (state(i).role != routing::WorkerRole::kPrefill) return client(i);
  }
  return nullptr;
}

absl::StatusOr<Route> RerouteAfterFailure(const Route& failed, std::span<const int32_t> prompt_ids,
                                          std::string_view cache_salt, std::string_view session) {
  WorkerPool* pool = failed.load != nullptr ? failed.load->pool() : nullptr;
  if (pool == nullptr || failed.decode == nullptr) {
    return absl::UnavailableError("no other worker to retry on");
  }
  pool->MarkDown(failed.decode);
  BATON_ASSIGN_OR_RETURN(Route next, pool->Pick(prompt_ids, cache_salt, session));
  if (pool->metrics() != nullptr) pool->metrics()->CountReroute();
  return next;
}

RouteLoad::RouteLoad(WorkerPool* pool, routing::WorkerId serving, routing::WorkerId computing,
                     int64_t queued_tokens)
    : pool_(pool), serving_(serving), computing_(computing), queued_(queued_tokens) {
  pool_->state(serving_).in_flight.fetch_add(1);
  pool_->state(computing_).queued_tokens.fetch_add(queued_);
}

RouteLoad::~RouteLoad() {
  PromptDone();
  pool_->state(serving_).in_flight.fetch_sub(1);
}

void RouteLoad::PromptDone() {
  if (!prompt_done_.exchange(true)) pool_->state(computing_).queued_tokens.fetch_sub(queued_);
}

}  // namespace baton::dispatch
