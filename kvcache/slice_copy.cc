#include "kvcache/slice_copy.h"

#include <algorithm>

#include "common/strings.h"

namespace baton::kvcache {

absl::Status CheckSliceCompatible(const PageLayout& src, const PageLayout& dst) {
  const auto differs = [](const char* field, const auto& a, const auto& b) {
    return absl::FailedPreconditionError(StrCat("the two pages hold different models' K/V: ", field,
                                                " ", a, " (source) vs ", b, " (destination)"));
  };
  if (src.head_dim != dst.head_dim) return differs("head_dim", src.head_dim, dst.head_dim);
  if (src.block_size != dst.block_size) {
    return differs("block_size", src.block_size, dst.block_size);
  }
  if (src.dtype != dst.dtype) return differs("dtype", src.dtype, dst.dtype);
  return absl::OkStatus();
}

std::vector<CopyRun> SliceCopyRuns(const PageLayout& src, const PageLayout& dst,
                                   int64_t layer_begin, int64_t layer_end, int64_t pos_begin,
                                   int64_t pos_end) {
  std::vector<CopyRun> runs;
  const int64_t l0 = std::max({layer_begin, src.first_layer, dst.first_layer});
  const int64_t l1 =
      std::min({layer_end, src.first_layer + src.num_layers, dst.first_layer + dst.num_layers});
  const int64_t h0 = std::max(src.first_kv_head, dst.first_kv_head);
  const int64_t h1 =
      std::min(src.first_kv_head + src.num_kv_heads, dst.first_kv_head + dst.num_kv_heads);
  if (l0 >= l1 || h0 >= h1 || pos_begin >= pos_end) return runs;
  const int64_t elem = DtypeBytes(src.dtype);
  const int64_t head_bytes = src.head_dim * elem;
  const int64_t run_bytes = (h1 - h0) * head_bytes;
  // Byte offset of (local layer, K or V, position, local head) in a page of `l`.
  const auto offset = [&](const PageLayout& l, int64_t layer, int64_t half, int64_t pos) {
    const int64_t row = l.num_kv_heads * head_bytes;
    const int64_t local_layer = layer - l.first_layer;
    return ((local_layer * 2 + half) * l.block_size + pos) * row +
           (h0 - l.first_kv_head) * head_bytes;
  };
  for (int64_t layer = l0; layer < l1; ++layer) {
    for (int64_t half = 0; half < 2; ++half) {
      for (int64_t pos = pos_begin; pos < pos_end; ++pos) {
        const CopyRun r{offset(src, layer, half, pos), offset(dst, layer, half, pos), run_bytes};
        if (!runs.empty()) {
          CopyRun& last = runs.back();
          if (last.src_offset + last.bytes == r.src_offset &&
              last.dst_offset + last.bytes == r.dst_offset) {
            last.bytes += r.bytes;
            continue;
          }
        }
        runs.push_back(r);
      }
    }
  }
  return runs;
}

}  // namespace baton::kvcache
