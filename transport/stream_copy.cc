#include "transport/stream_copy.h"

#include <atomic>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace baton::transport {

void StreamCopy(void* dst, const void* src, size_t bytes) {
#if defined(__x86_64__)
  // Below a few lines, or unaligned, ordinary stores cost no more.
  constexpr size_t kMin = 256;
  if (bytes >= kMin && reinterpret_cast<uintptr_t>(dst) % 64 == 0) {
    auto* d = static_cast<__m128i*>(dst);
    const auto* s = static_cast<const __m128i*>(src);
    const size_t lines = bytes / 64;
    for (size_t i = 0; i < lines; ++i, d += 4, s += 4) {
      const __m128i a = _mm_loadu_si128(s), b = _mm_loadu_si128(s + 1);
      const __m128i c = _mm_loadu_si128(s + 2), e = _mm_loadu_si128(s + 3);
      _mm_stream_si128(d, a);
      _mm_stream_si128(d + 1, b);
      _mm_stream_si128(d + 2, c);
      _mm_stream_si128(d + 3, e);
    }
    const size_t done = lines * 64;
    if (done < bytes) {
      std::memcpy(static_cast<char*>(dst) + done, static_cast<const char*>(src) + done,
                  bytes - done);
    }
    return;
  }
#endif
  std::memcpy(dst, src, bytes);
}

void StreamFence() {
#if defined(__x86_64__)
  _mm_sfence();
#endif
  std::atomic_thread_fence(std::memory_order_release);
}

}  // namespace baton::transport
