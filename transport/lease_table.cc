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
  if (static_cast<int64_t>(by_id_.size()) >= limits_.max_leases) {
    return absl::ResourceExhaustedError(StrCat("leases held: ", by_id_.size(), "; the limit is ",
                                               limits_.max_leases,
                                               " (transfers in flight); retry later"));
  }
  const Use use = [&] {
    auto it = by_caller_.find(lease.caller);
    return it == by_caller_.end() ? Use{} : it->second;
  }();
  if (use.leases >= limits_.max_leases_per_caller) {
    return absl::ResourceExhaustedError(
        StrCat("this caller holds ", use.leases, " leases; the limit per caller is ",
               limits_.max_leases_per_caller,
               " (--max-reserved-share-per-caller of the worker's leases); retry later"));
  }
  const auto pages = static_cast<int64_t>(lease.pages.size());
  if (use.pages + pages > limits_.max_pages_per_caller) {
    return absl::ResourceExhaustedError(
        StrCat("this caller holds ", use.pages, " reserved pages and asks for ", pages,
               "; the limit per caller is ", limits_.max_pages_per_caller,
               " (--max-reserved-share-per-caller of the KV pool); retry later"));
  }
  Insert(std::move(lease));
  return absl::OkStatus();
}

absl::Status LeaseTable::PutBack(Lease lease) {
  std::lock_guard<std::mutex> lock(mu_);
  if (by_id_.count(lease.request_id) > 0) {
    return absl::AlreadyExistsError(
        StrCat("request '", lease.request_id, "' already holds a lease on pages"));
  }
  Insert(std::move(lease));
  return absl::OkStatus();
}

void LeaseTable::Insert(Lease lease) {
  const auto pages = static_cast<int64_t>(lease.pages.size());
  pages_reserved_ += pages;
  Use& use = by_caller_[lease.caller];
  ++use.leases;
  use.pages += pages;
  by_deadline_.emplace(lease.deadline, lease.request_id);
  std::string id = lease.request_id;
  by_id_.emplace(std::move(id), std::move(lease));
}

void LeaseTable::Forget(const Lease& lease) {
  pages_reserved_ -= static_cast<int64_t>(lease.pages.size());
  auto it = by_caller_.find(lease.caller);
  it->second.pages -= static_cast<int64_t>(lease.pages.size());
  if (--it->second.leases == 0) by_caller_.erase(it);
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
  Forget(lease);
  return lease;
}

std::vector<Lease> LeaseTable::Expire(absl::Time now) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Lease> ended;
  while (!by_deadline_.empty() && by_deadline_.begin()->first <= now) {
    auto it = by_id_.find(by_deadline_.begin()->second);
    by_deadline_.erase(by_deadline_.begin());
    Forget(it->second);
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

int64_t LeaseTable::leases_held_by(std::string_view caller) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_caller_.find(caller);
  return it == by_caller_.end() ? 0 : it->second.leases;
}

int64_t LeaseTable::pages_reserved_by(std::string_view caller) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_caller_.find(caller);
  return it == by_caller_.end() ? 0 : it->second.pages;
}

}  // namespace baton::transport
