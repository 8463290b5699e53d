// The paged KV pool: one allocation, cut into pages of `block_size` positions. A page
// holds every layer's K and V for its positions, so one page is one unit to share, to
// evict or to ship to another worker.
//
// Page layout (f32): [layer][K, V][position in page][kv head][head_dim].
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"

namespace baton::engine {

struct KvLayout {
  int64_t num_layers = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t block_size = 16;

  int64_t floats_per_block() const { return num_layers * 2 * block_size * num_kv_heads * head_dim; }
  int64_t bytes_per_block() const { return floats_per_block() * int64_t{sizeof(float)}; }
};

class KvPool {
 public:
  // InvalidArgument if the layout is degenerate or num_blocks < 1; ResourceExhausted if
  // the memory cannot be had. `memory` (64-byte aligned, num_blocks pages, and
  // outliving the pool) is used instead of a mapping of the pool's own when given.
  static absl::StatusOr<std::unique_ptr<KvPool>> Create(const KvLayout& layout, int64_t num_blocks,
                                                        void* memory = nullptr);

  const KvLayout& layout() const { return layout_; }
  int64_t num_blocks() const { return num_blocks_; }
  int64_t num_free_blocks() const { return static_cast<int64_t>(free_.size()); }

  // Takes a free page; ResourceExhausted naming the pool size when none is left.
  absl::StatusOr<int32_t> Allocate();
  void Free(int32_t block);  // precondition: allocated

  float* block_data(int32_t block) { return data_.get() + block * layout_.floats_per_block(); }
  // K of `layer` in page 0; successive pages are floats_per_block() apart. V follows K
  // after block_size * num_kv_heads * head_dim floats.
  float* layer_k(int64_t layer) { return data_.get() + layer * 2 * layer_stride(); }
  float* layer_v(int64_t layer) { return layer_k(layer) + layer_stride(); }
  int64_t layer_stride() const {
    return layout_.block_size * layout_.num_kv_heads * layout_.head_dim;
  }

 private:
  KvPool(const KvLayout& layout, int64_t num_blocks);

  struct Unmapper {
    size_t bytes;  // 0: the memory is not the pool's to unmap
    void operator()(float* p) const;
  };
  KvLayout layout_;
  int64_t num_blocks_;
  // Anonymous memory (or the caller's): zero pages until first written, so a large budget
  // costs only what is used.
  std::unique_ptr<float, Unmapper> data_;
  std::vector<int32_t> free_;  // a stack: the most recently freed page is reused first
  std::vector<bool> allocated_;
};

}  // namespace baton::engine
