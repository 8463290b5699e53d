// The paged KV pool: one allocation, cut into pages of `block_size` positions. A page
// holds every layer's K and V for its positions, so one page is one unit to share, to
// evict or to ship to another worker.
//
// Page layout (kvcache/page_layout.h), f32 on CPU: [layer][kv head][K, V][position in
// page][head_dim].
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "kvcache/page_layout.h"

namespace baton::engine {

using kvcache::PageLayout;

class KvPool {
 public:
  // InvalidArgument if the layout is degenerate or num_blocks < 1; ResourceExhausted if
  // the memory cannot be had. `memory` (64-byte aligned, num_blocks pages, and
  // outliving the pool) is used instead of a mapping of the pool's own when given.
  static absl::StatusOr<std::unique_ptr<KvPool>> Create(const PageLayout& layout,
                                                        int64_t num_blocks, void* memory = nullptr);

  const PageLayout& layout() const { return layout_; }
  int64_t num_blocks() const { return num_blocks_; }
  int64_t num_free_blocks() const { return static_cast<int64_t>(free_.size()); }

  // Takes a free page; ResourceExhausted naming the pool size when none is left.
  absl::StatusOr<int32_t> Allocate();
  void Free(int32_t block);  // precondition: allocated

  float* block_data(int32_t block) { return data_.get() + block * layout_.elements_per_block(); }

 private:
  KvPool(const PageLayout& layout, int64_t num_blocks);

  struct Unmapper {
    size_t bytes;  // 0: the memory is not the pool's to unmap
    void operator()(float* p) const;
  };
  PageLayout layout_;
  int64_t num_blocks_;
  // Anonymous memory (or the caller's): zero pages until first written, so a large budget
  // costs only what is used.
  std::unique_ptr<float, Unmapper> data_;
  std::vector<int32_t> free_;  // a stack: the most recently freed page is reused first
  std::vector<bool> allocated_;
};

}  // namespace baton::engine
