#include "router/worker_pool.h"

#include "common/strings.h"

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
                                                               PrefillFailover failover,
                                                               RouterMetrics* metrics) {
  std::unique_ptr<WorkerPool> pool(new WorkerPool());
  pool->failover_ = failover;
  pool->metrics_ = metrics;
  for (const std::string& t : SplitList(colocated)) {
    pool->all_.push_back(std::make_unique<WorkerClient>(t));
    pool->serving_.push_back(pool->all_.back().get());
    pool->is_decode_.push_back(false);
  }
  for (const std::string& t : SplitList(decode)) {
    pool->all_.push_back(std::make_unique<WorkerClient>(t));
    pool->serving_.push_back(pool->all_.back().get());
    pool->is_decode_.push_back(true);
  }
  for (const std::string& t : SplitList(prefill)) {
    pool->all_.push_back(std::make_unique<WorkerClient>(t));
    pool->prefill_.push_back(pool->all_.back().get());
  }
  if (pool->serving_.empty()) {
    return absl::InvalidArgumentError(
        "no worker to serve from: give --worker (colocated) or --decode-worker (with "
        "--prefill-worker), each a comma-separated list of host:port");
  }
  return pool;
}

Route WorkerPool::Pick() {
  const size_t i = next_serving_.fetch_add(1) % serving_.size();
  Route r(serving_[i]);
  if (is_decode_[i] && !prefill_.empty()) {
    r.prefill = prefill_[next_prefill_.fetch_add(1) % prefill_.size()];
    r.pool = this;
  }
  return r;
}

WorkerClient* WorkerPool::OtherPrefill(const WorkerClient* failed) const {
  for (WorkerClient* w : prefill_) {
    if (w != failed) return w;
  }
  return nullptr;
}

}  // namespace baton::router
