#include "engine/gpu_kv_mirror.h"

#include <algorithm>
#include <vector>

#include "common/status.h"
#include "common/strings.h"

namespace baton::engine {

template <typename Copy>
absl::Status GpuKvMirror::ForEachRun(std::span<const int32_t> pages, Copy copy) const {
  std::vector<int32_t> sorted(pages.begin(), pages.end());
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  if (!sorted.empty() && (sorted.front() < 0 || sorted.back() >= num_pages_)) {
    return absl::OutOfRangeError(StrCat("KV page ",
                                        sorted.front() < 0 ? sorted.front() : sorted.back(),
                                        " is outside the pool of ", num_pages_, " pages"));
  }
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i + 1;
    while (j < sorted.size() && sorted[j] == sorted[j - 1] + 1) ++j;
    BATON_RETURN_IF_ERROR(copy(sorted[i] * page_bytes_, static_cast<int64_t>(j - i) * page_bytes_));
    i = j;
  }
  return absl::OkStatus();
}

absl::Status GpuKvMirror::ToHost(std::span<const int32_t> pages) {
  return ForEachRun(pages, [this](int64_t offset, int64_t bytes) {
    return ops_->CopyToHost(host_ + offset, device_ + offset, bytes);
  });
}

absl::Status GpuKvMirror::ToDevice(std::span<const int32_t> pages) {
  BATON_RETURN_IF_ERROR(ForEachRun(pages, [this](int64_t offset, int64_t bytes) {
    return ops_->CopyToDevice(device_ + offset, host_ + offset, bytes);
  }));
  return ops_->Synchronize();  // the copy's errors here, not in a later step
}

}  // namespace baton::engine
