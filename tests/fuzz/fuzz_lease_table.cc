// Fuzzes the receiver's lease table (transport/lease_table.h) with sequences of what
// callers can make it do: reserve pages for a request, take the lease on Complete or
// Release, and let time pass so that leases expire. A plain model (a map) is the oracle:
// every answer, the counts, the next deadline and which leases expire, earliest first,
// must agree with it; no page is held twice or lost.
//
// Each op is 3 bytes: the op (Add, Take, Expire), a request (one of 6 ids) and an amount
// (pages to reserve, or milliseconds of lease / of time passing).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "transport/lease_table.h"

namespace {

using baton::transport::Lease;
using baton::transport::LeaseTable;

constexpr int64_t kMaxLeases = 4;

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  LeaseTable table(kMaxLeases);
  std::map<std::string, Lease> model;
  absl::Time now = absl::UnixEpoch();
  int32_t next_page = 0;
  for (size_t i = 0; i + 3 <= size; i += 3) {
    const std::string id = std::string("req-") + static_cast<char>('a' + data[i + 1] % 6);
    const int amount = data[i + 2];
    switch (data[i] % 3) {
      case 0: {  // Add
        Lease l{id, {}, now + absl::Milliseconds(amount)};
        for (int p = 0; p < amount % 5; ++p) l.pages.push_back(next_page++);
        const absl::Status s = table.Add(l);
        if (model.count(id) > 0) {
          Check(s.code() == absl::StatusCode::kAlreadyExists);
        } else if (static_cast<int64_t>(model.size()) >= kMaxLeases) {
          Check(s.code() == absl::StatusCode::kResourceExhausted);
        } else {
          Check(s.ok());
          model.emplace(id, std::move(l));
        }
        break;
      }
      case 1: {  // Take (Complete or Release)
        absl::StatusOr<Lease> got = table.Take(id);
        auto it = model.find(id);
        if (it == model.end()) {
          Check(got.status().code() == absl::StatusCode::kNotFound);
        } else {
          Check(got.ok() && got->pages == it->second.pages && got->deadline == it->second.deadline);
          model.erase(it);
        }
        break;
      }
      default: {  // time passes
        now += absl::Milliseconds(amount);
        std::vector<std::pair<absl::Time, std::string>> due;
        for (const auto& [key, l] : model) {
          if (l.deadline <= now) due.emplace_back(l.deadline, key);
        }
        std::sort(due.begin(), due.end());
        const std::vector<Lease> expired = table.Expire(now);
        Check(expired.size() == due.size());
        for (size_t k = 0; k < expired.size(); ++k) {
          Check(expired[k].request_id == due[k].second);
          Check(expired[k].pages == model.at(due[k].second).pages);
          model.erase(due[k].second);
        }
        break;
      }
    }
    int64_t pages = 0;
    std::optional<absl::Time> next;
    for (const auto& [key, l] : model) {
      pages += static_cast<int64_t>(l.pages.size());
      if (!next || l.deadline < *next) next = l.deadline;
    }
    Check(table.leases_held() == static_cast<int64_t>(model.size()));
    Check(table.pages_reserved() == pages);
    Check(table.NextDeadline() == next);
  }
  return 0;
}
