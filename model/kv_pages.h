// One rank's KV pages as a forward addresses them, in host memory (the CPU forward,
// model/arch/llama.h) or device memory (the GPU forward, model/arch/llama_gpu.h): the page
// layout of kvcache/page_layout.h, which the engine's pool turns into this
// (engine/model_runner.h, KvPagesOf).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/attention.h"

namespace baton::model {

// Page p, stage layer l (0-based within the stage), KV head h of the shard holds K then
// V, each [block_size positions][head_dim] elements of `dtype`. Strides are in elements.
struct KvPages {
  std::byte* data = nullptr;
  cpu::KvDtype dtype = cpu::KvDtype::kF32;
  int64_t num_pages = 0;
  int64_t page_elements = 0;   // from one page to the next
  int64_t layer_elements = 0;  // from one layer to the next in a page
  int64_t head_stride = 0;     // from one KV head to the next in a layer
  int64_t rows_elements = 0;   // block_size * head_dim: from a head's K to its V
  int64_t block_size = 0;

  int64_t element_bytes() const { return dtype == cpu::KvDtype::kBf16 ? 2 : 4; }
  // Head 0's K (V) of the stage layer in page 0.
  std::byte* k(int64_t stage_layer) const {
    return data + stage_layer * layer_elements * element_bytes();
  }
  std::byte* v(int64_t stage_layer) const {
    return k(stage_layer) + rows_elements * element_bytes();
  }
};

}  // namespace baton::model
