// A bound on the machine stack the recursive parser and evaluator may use. Counting
// nesting levels alone cannot bound bytes: frame sizes differ between constructs and
// between builds (an ASan frame is several times a release one), and the calling thread's
// stack may be small. So recursion also checks how far the stack pointer has moved.
#pragma once

#include <cstddef>
#include <cstdint>

namespace baton::templating::jinja {

class StackBudget {
 public:
  // Allows `max_bytes` below the caller's frame, and never closer than a safety margin to
  // the end of this thread's stack.
  explicit StackBudget(size_t max_bytes);

  bool Exhausted() const { return Here() < floor_; }
  size_t max_bytes() const { return max_bytes_; }

 private:
  static uintptr_t Here() { return reinterpret_cast<uintptr_t>(__builtin_frame_address(0)); }

  uintptr_t floor_;
  size_t max_bytes_;
};

// What the parser and the evaluator each allow themselves.
inline constexpr size_t kStackBudgetBytes = size_t{2} << 20;

}  // namespace baton::templating::jinja
