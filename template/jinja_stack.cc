#include "template/jinja_stack.h"

#include <pthread.h>

#include <algorithm>

namespace baton::templating::jinja {
namespace {

// Room left below the floor for what runs after the check (library calls, destructors).
constexpr uintptr_t kSafetyMargin = 256 << 10;

// Lowest address of the calling thread's stack, or 0 when unknown. Cached per thread:
// for the main thread glibc reads /proc/self/maps to answer.
uintptr_t ThreadStackLow() {
  thread_local const uintptr_t low = [] {
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) != 0) return uintptr_t{0};
    void* addr = nullptr;
    size_t size = 0;
    const bool ok = pthread_attr_getstack(&attr, &addr, &size) == 0;
    pthread_attr_destroy(&attr);
    return ok ? reinterpret_cast<uintptr_t>(addr) : uintptr_t{0};
  }();
  return low;
}

}  // namespace

StackBudget::StackBudget(size_t max_bytes) : max_bytes_(max_bytes) {
  const uintptr_t here = Here();
  floor_ = here > max_bytes ? here - max_bytes : 0;
  if (const uintptr_t low = ThreadStackLow(); low != 0 && low < here) {
    floor_ = std::max(floor_, std::min(here, low + kSafetyMargin));
  }
}

}  // namespace baton::templating::jinja
