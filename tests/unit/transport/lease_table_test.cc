// LeaseTable against a naive model (a vector of leases scanned in full), over random
// sequences of add, take and expire with a fake clock; plus each error and its message.
#include "transport/lease_table.h"

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "common/strings.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::transport {
namespace {

using ::testing::HasSubstr;

const absl::Time kT0 = absl::FromUnixSeconds(1'800'000'000);

TEST(LeaseTableTest, TakeEndsALeaseOnceAndFreesItsCount) {
  LeaseTable t(4);
  ASSERT_TRUE(t.Add({"a", {1, 2, 3}, kT0 + absl::Seconds(5)}).ok());
  EXPECT_EQ(t.leases_held(), 1);
  EXPECT_EQ(t.pages_reserved(), 3);
  auto l = t.Take("a");
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->pages, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(t.pages_reserved(), 0);
  EXPECT_EQ(t.Take("a").status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(t.NextDeadline().has_value());
  // Its deadline is gone too: nothing expires later.
  EXPECT_TRUE(t.Expire(kT0 + absl::Hours(1)).empty());
  EXPECT_EQ(t.expired_total(), 0);
}

TEST(LeaseTableTest, ExpireEndsLeasesAtTheirDeadlineEarliestFirst) {
  LeaseTable t(8);
  ASSERT_TRUE(t.Add({"late", {7}, kT0 + absl::Seconds(9)}).ok());
  ASSERT_TRUE(t.Add({"early", {1, 2}, kT0 + absl::Seconds(3)}).ok());
  ASSERT_TRUE(t.Add({"mid", {4}, kT0 + absl::Seconds(5)}).ok());
  EXPECT_EQ(t.NextDeadline(), kT0 + absl::Seconds(3));
  EXPECT_TRUE(t.Expire(kT0 + absl::Seconds(3) - absl::Nanoseconds(1)).empty());
  auto ended = t.Expire(kT0 + absl::Seconds(5));  // a deadline equal to now has ended
  ASSERT_EQ(ended.size(), 2u);
  EXPECT_EQ(ended[0].request_id, "early");
  EXPECT_EQ(ended[1].request_id, "mid");
  EXPECT_EQ(t.pages_reserved(), 1);
  EXPECT_EQ(t.expired_total(), 2);
  EXPECT_THAT(std::string(t.Take("early").status().message()), HasSubstr("expired"));
}

TEST(LeaseTableTest, ErrorsNameTheRequestAndTheBound) {
  LeaseTable t(1);
  EXPECT_EQ(t.Add({"", {1}, kT0}).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(t.Add({"a", {1}, kT0}).ok());
  absl::Status dup = t.Add({"a", {2}, kT0});
  EXPECT_EQ(dup.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(dup.message()), HasSubstr("'a'"));
  absl::Status full = t.Add({"b", {2}, kT0});
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(full.message()), HasSubstr("the limit is 1"));
  EXPECT_EQ(t.pages_reserved(), 1) << "a refused lease reserves nothing";
}

TEST(LeaseTableTest, OneCallerHoldsAtMostItsLeasesAndPages) {
  LeaseTable t(LeaseLimits{.max_leases = 8, .max_leases_per_caller = 3, .max_pages_per_caller = 5});
  ASSERT_TRUE(t.Add({"a1", {1, 2}, kT0, "10.0.0.1"}).ok());
  ASSERT_TRUE(t.Add({"a2", {3, 4}, kT0, "10.0.0.1"}).ok());
  absl::Status pages = t.Add({"a3", {5, 6}, kT0, "10.0.0.1"});
  EXPECT_EQ(pages.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(pages.message()), HasSubstr("holds 4 reserved pages and asks for 2"));
  EXPECT_THAT(std::string(pages.message()), HasSubstr("--max-reserved-share-per-caller"));
  ASSERT_TRUE(t.Add({"a3", {5}, kT0, "10.0.0.1"}).ok()) << "up to the bound itself";
  EXPECT_EQ(t.Add({"a4", {}, kT0, "10.0.0.1"}).code(), absl::StatusCode::kResourceExhausted)
      << "three leases is this caller's bound";
  // Another caller is not held back by the first one.
  ASSERT_TRUE(t.Add({"b1", {7, 8, 9}, kT0, "10.0.0.2"}).ok());
  EXPECT_EQ(t.leases_held_by("10.0.0.1"), 3);
  EXPECT_EQ(t.pages_reserved_by("10.0.0.1"), 5);
  EXPECT_EQ(t.pages_reserved_by("10.0.0.2"), 3);
  // A taken lease frees its caller's share; put back (a renewal), it counts again without
  // being refused, even where a fresh one would be.
  auto a1 = t.Take("a1");
  ASSERT_TRUE(a1.ok());
  EXPECT_EQ(t.pages_reserved_by("10.0.0.1"), 3);
  ASSERT_TRUE(t.Add({"a5", {10, 11}, kT0, "10.0.0.1"}).ok());
  a1->deadline = kT0 + absl::Seconds(1);
  ASSERT_TRUE(t.PutBack(*a1).ok());
  EXPECT_EQ(t.pages_reserved_by("10.0.0.1"), 7);
  EXPECT_EQ(t.PutBack(*a1).code(), absl::StatusCode::kAlreadyExists);
  // Expiry frees the share too.
  EXPECT_EQ(t.Expire(kT0 + absl::Seconds(1)).size(), 5u);
  EXPECT_EQ(t.pages_reserved_by("10.0.0.1"), 0);
  EXPECT_EQ(t.leases_held_by("10.0.0.1"), 0);
  EXPECT_EQ(t.pages_reserved(), 0);
}

// The naive model: every lease in a vector.
struct Naive {
  std::vector<Lease> leases;
  int64_t expired = 0;
};

TEST(LeaseTableTest, MatchesANaiveModelOverRandomOperations) {
  for (int seed = 0; seed < 20; ++seed) {
    std::mt19937 rng(seed);
    LeaseTable t(16);
    Naive n;
    absl::Time now = kT0;
    for (int op = 0; op < 400; ++op) {
      const int kind = rng() % 3;
      const std::string id = StrCat("r", rng() % 24);
      if (kind == 0) {
        Lease l{id, std::vector<int32_t>(1 + rng() % 5, static_cast<int32_t>(op)),
                now + absl::Milliseconds(rng() % 2000)};
        const bool exists = std::any_of(n.leases.begin(), n.leases.end(),
                                        [&](const Lease& x) { return x.request_id == id; });
        const absl::Status s = t.Add(l);
        if (exists) {
          ASSERT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
        } else if (n.leases.size() >= 16) {
          ASSERT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
        } else {
          ASSERT_TRUE(s.ok()) << s;
          n.leases.push_back(l);
        }
      } else if (kind == 1) {
        auto it = std::find_if(n.leases.begin(), n.leases.end(),
                               [&](const Lease& x) { return x.request_id == id; });
        auto got = t.Take(id);
        ASSERT_EQ(got.ok(), it != n.leases.end());
        if (got.ok()) {
          ASSERT_EQ(got->pages, it->pages);
          n.leases.erase(it);
        }
      } else {
        now += absl::Milliseconds(rng() % 300);
        std::vector<Lease> want;
        for (auto it = n.leases.begin(); it != n.leases.end();) {
          if (it->deadline <= now) {
            want.push_back(*it);
            it = n.leases.erase(it);
          } else {
            ++it;
          }
        }
        std::vector<Lease> got = t.Expire(now);
        n.expired += static_cast<int64_t>(want.size());
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 1; i < got.size(); ++i) ASSERT_LE(got[i - 1].deadline, got[i].deadline);
        auto ids = [](const std::vector<Lease>& v) {
          std::vector<std::string> out;
          for (const Lease& l : v) out.push_back(l.request_id);
          std::sort(out.begin(), out.end());
          return out;
        };
        ASSERT_EQ(ids(got), ids(want));
      }
      int64_t pages = 0;
      std::optional<absl::Time> next;
      for (const Lease& l : n.leases) {
        pages += static_cast<int64_t>(l.pages.size());
        if (!next || l.deadline < *next) next = l.deadline;
      }
      ASSERT_EQ(t.leases_held(), static_cast<int64_t>(n.leases.size()));
      ASSERT_EQ(t.pages_reserved(), pages);
      ASSERT_EQ(t.expired_total(), n.expired);
      ASSERT_EQ(t.NextDeadline(), next);
    }
  }
}

}  // namespace
}  // namespace baton::transport
