// The receiver's side of a transfer's lease: pages reserved for a request until the
// transfer completes, the request is released, or the lease's deadline passes. The caller
// owns the pages; the table only says which lease holds which, and hands back the ones
// that ended so that the caller frees them (architecture.md: "If the lease expires before
// completion, the pages are freed"). Each lease names its caller (the peer that reserved
// it), and one caller may hold only so many leases and pages at once, so that one runaway
// or hostile member of the cluster cannot reserve the whole pool (docs/security.md).
//
//   LeaseTable leases({.max_leases = 1024, .max_pages_per_caller = 512});
//   BATON_RETURN_IF_ERROR(leases.Add({id, pages, now + lease}));
//   ...
//   for (Lease& l : leases.Expire(absl::Now())) pool.Free(l.pages);   // periodically
//   BATON_ASSIGN_OR_RETURN(Lease l, leases.Take(id));                  // on Complete
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace baton::transport {

struct Lease {
  std::string request_id;
  std::vector<int32_t> pages;
  absl::Time deadline;
  std::string caller = {};  // who reserved it (service::CallerOf); may be empty
};

struct LeaseLimits {
  int64_t max_leases = 4096;  // all callers together
  int64_t max_leases_per_caller = std::numeric_limits<int64_t>::max();
  int64_t max_pages_per_caller = std::numeric_limits<int64_t>::max();
};

class LeaseTable {
 public:
  explicit LeaseTable(int64_t max_leases) : LeaseTable(LeaseLimits{.max_leases = max_leases}) {}
  explicit LeaseTable(const LeaseLimits& limits) : limits_(limits) {}

  // AlreadyExists when the request holds a lease; ResourceExhausted at max_leases, or when
  // the caller would pass its own bound on leases or pages (the message names the bound);
  // InvalidArgument for an empty request id.
  absl::Status Add(Lease lease);
  // Puts back a lease that Take handed out (to renew its deadline, or after checking its
  // transfer): no bound applies, since its pages were counted until Take. AlreadyExists
  // when the request holds a lease.
  absl::Status PutBack(Lease lease);
  // Ends a lease on completion or release. NotFound when it never existed or already
  // ended (an expired lease's pages are already the caller's to free).
  absl::StatusOr<Lease> Take(std::string_view request_id);
  // Ends every lease whose deadline is at or before `now`, earliest first.
  std::vector<Lease> Expire(absl::Time now);
  // The earliest deadline of the leases held, to wake up for.
  std::optional<absl::Time> NextDeadline() const;

  int64_t leases_held() const;
  int64_t pages_reserved() const;
  int64_t expired_total() const;
  // What one caller holds now.
  int64_t leases_held_by(std::string_view caller) const;
  int64_t pages_reserved_by(std::string_view caller) const;

 private:
  struct Use {
    int64_t leases = 0;
    int64_t pages = 0;
  };
  void Insert(Lease lease);         // mu_ held
  void Forget(const Lease& lease);  // mu_ held: the counts of a lease taken out

  mutable std::mutex mu_;
  const LeaseLimits limits_;
  std::map<std::string, Use, std::less<>> by_caller_;
  std::map<std::string, Lease, std::less<>> by_id_;
  std::set<std::pair<absl::Time, std::string>> by_deadline_;
  int64_t pages_reserved_ = 0;
  int64_t expired_total_ = 0;
};

}  // namespace baton::transport
