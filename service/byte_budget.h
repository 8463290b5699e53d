// A bound on the bytes that requests in flight hold at once (their bodies): each request
// takes its share before the bytes are read and gives it back when it is done, so that a
// burst of large bodies gets 429s instead of taking the process's memory.
//
//   ByteBudget budget(64 << 20);
//   std::optional<ByteBudget::Lease> lease = budget.TryTake(content_length);
//   if (!lease) return Answer429();
//   ...  // the lease gives the bytes back when it goes out of scope
#pragma once

#include <atomic>
#include <cstddef>
#include <optional>

namespace baton::service {

class ByteBudget {
 public:
  explicit ByteBudget(size_t limit) : limit_(limit) {}
  ByteBudget(const ByteBudget&) = delete;
  ByteBudget& operator=(const ByteBudget&) = delete;

  class Lease {
   public:
    Lease(Lease&& other) noexcept : budget_(other.budget_), bytes_(other.bytes_) {
      other.budget_ = nullptr;
    }
    Lease& operator=(Lease&& other) noexcept {
      if (this != &other) {
        Release();
        budget_ = other.budget_;
        bytes_ = other.bytes_;
        other.budget_ = nullptr;
      }
      return *this;
    }
    ~Lease() { Release(); }
    size_t bytes() const { return bytes_; }

   private:
    friend class ByteBudget;
    Lease(ByteBudget* budget, size_t bytes) : budget_(budget), bytes_(bytes) {}
    void Release() {
      if (budget_ != nullptr) budget_->held_.fetch_sub(bytes_);
      budget_ = nullptr;
    }
    ByteBudget* budget_;
    size_t bytes_;
  };

  // `bytes` more, if they fit under the limit with what is held; else nothing. A limit of
  // 0 means no bound.
  std::optional<Lease> TryTake(size_t bytes) {
    size_t held = held_.load();
    do {
      if (limit_ != 0 && (bytes > limit_ || held > limit_ - bytes)) return std::nullopt;
    } while (!held_.compare_exchange_weak(held, held + bytes));
    return Lease(this, bytes);
  }

  size_t limit() const { return limit_; }
  size_t held() const { return held_.load(); }

 private:
  const size_t limit_;
  std::atomic<size_t> held_{0};
};

}  // namespace baton::service
