// The host copy of a GPU's KV pages (engine/kv_host_mirror.h), copied with the device's
// GpuOps: runs of consecutive pages in one copy each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "engine/kv_host_mirror.h"
#include "kernels/gpu_ops.h"

namespace baton::engine {

class GpuKvMirror : public KvHostMirror {
 public:
  // `device` and `host` hold the same number of pages of `page_bytes`; `ops`, `device` and
  // `host` outlive the mirror.
  GpuKvMirror(kernels::GpuOps* ops, std::byte* device, std::byte* host, int64_t page_bytes,
              int64_t num_pages)
      : ops_(ops), device_(device), host_(host), page_bytes_(page_bytes), num_pages_(num_pages) {}

  std::byte* data() override { return host_; }
  absl::Status ToHost(std::span<const int32_t> pages) override;
  absl::Status ToDevice(std::span<const int32_t> pages) override;

 private:
  // Calls `copy(offset, bytes)` for each run of consecutive pages of `pages` (any order;
  // repeats are copied once). OutOfRange for a page outside the pool.
  template <typename Copy>
  absl::Status ForEachRun(std::span<const int32_t> pages, Copy copy) const;

  kernels::GpuOps* ops_;
  std::byte* device_;
  std::byte* host_;
  int64_t page_bytes_;
  int64_t num_pages_;
};

}  // namespace baton::engine
