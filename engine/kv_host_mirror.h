// A host copy of a KV pool whose pages live in a GPU's memory, page for page: the same
// layout and page ids. KV transfers read and write pages on the host (UCX puts from and
// into registered memory, checksums over the pages), and Debian's UCX cannot register
// device memory. So a GPU worker in a prefill or decode role registers this copy in its
// pool's place: the prefill side copies a step's pages out before its sinks push them
// (GpuBackend), the decode side copies the received pages in when the transfer completes
// (Engine::CompleteKv). docs/transport.md, "GPU pages".
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "absl/status/status.h"

namespace baton::engine {

class KvHostMirror {
 public:
  virtual ~KvHostMirror() = default;
  // Page 0's host copy; pages are the pool's page_bytes() apart.
  virtual std::byte* data() = 0;
  // The device's `pages` to the host copy, and the reverse; done when they return.
  virtual absl::Status ToHost(std::span<const int32_t> pages) = 0;
  virtual absl::Status ToDevice(std::span<const int32_t> pages) = 0;
};

}  // namespace baton::engine
