#include "transport/lease_table.h"

#include "common/strings.h"

namespace baton::transport {

absl::Status LeaseTable::Add(Lease lease) {
  if (lease.request_id.empty()) return absl::InvalidArgumentError("a lease needs a request id");
  std::lock_guard<std::mutex> lock(mu_);
  if (by_id_.count(lease.request_id) > 0) {
    return absl::AlreadyExistsError(
        StrCat("request '", lease.request_id, "' already holds a lease on pages"));
  }
  if (static_cast<int64_t>(by_id_.size()) >= max_leases_) {
    return absl::ResourceExhaustedError(StrCat("leases held: ", by_id_.size(), "; the limit is ",
                                               max_leases_, " (transfers in flight); retry later"));
  }
  pages_reserved_ += static_cast<int64_t>(lease.pages.size());
  by_deadline_.emplace(lease.deadline, lease.request_id);
  std::string id = lease.request_id;
  by_id_.emplace(std::move(id), std::move(lease));
  return absl::OkStatus();
}

absl::StatusOr<Lease> LeaseTable::Take(std::string_view request_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_id_.find(request_id);
  if (it == by_id_.end()) {
    return absl::NotFoundError(StrCat("request '", request_id,
                                      "' holds no lease: it never reserved pages, or its "
                                      "lease ended (completed, released or expired)"));
  }
  Lease lease = std::move(it->second);
  by_id_.erase(it);
  by_deadline_.erase({lease.deadline, lease.request_id});
  pages_reserved_ -= static_cast<int64_t>(lease.pages.size());
  return lease;
}

std::vector<Lease> LeaseTable::Expire(absl::Time now) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Lease> ended;
  while (!by_deadline_.empty() && by_deadline_.begin()->first <= now) {
    auto it = by_id_.find(by_deadline_.begin()->second);
    by_deadline_.erase(by_deadline_.begin());
    pages_reserved_ -= static_cast<int64_t>(it->second.pages.size());
    ended.push_back(std::move(it->second));
    by_id_.erase(it);
    ++expired_total_;
  }
  return ended;
}

std::optional<absl::Time> LeaseTable::NextDeadline() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (by_deadline_.empty()) return std::nullopt;
  return by_deadline_.begin()->first;
}

int64_t LeaseTable::leases_held() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(by_id_.size());
}

int64_t LeaseTable::pages_reserved() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pages_reserved_;
}

int64_t LeaseTable::expired_total() const {
  std::lock_guard<std::mutex> lock(mu_);
  return expired_total_;
}

}  // namespace baton::transport
