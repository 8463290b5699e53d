// A copy into memory another process will read later (a peer's mapped KV pool): with
// non-temporal stores on x86-64 where the destination is cache-line aligned, so that the
// copy neither reads the destination lines first nor evicts the sender's working set.
// That is how a large memcpy (and UCX's one big put) writes; a transfer's many runs of
// 1 to 64 KiB would otherwise each take ordinary stores. Elsewhere a memcpy.
#pragma once

#include <cstddef>

namespace baton::transport {

// Non-temporal stores are not ordered with later stores: call StreamFence() before telling
// the reader the bytes are there. One fence per transfer step, not per copy: a fence waits
// for the write-combining buffers to drain, which per 1 KiB run would cost most of it.
void StreamCopy(void* dst, const void* src, size_t bytes);
void StreamFence();

}  // namespace baton::transport
