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
  if (src.dtype != dst.dtype) {
    return absl::FailedPreconditionError(
        StrCat("the two pages hold K/V of different element types: dtype ", src.dtype,
               " (source) vs ", dst.dtype,
               " (destination); start the prefill and decode workers with the same "
               "--kv-cache-dtype"));
  }
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
  const int64_t run_bytes = (pos_end - pos_begin) * src.head_dim * elem;
  // Byte offset of (model layer, model head, K or V, pos_begin) in a page of `l`.
  const auto offset = [&](const PageLayout& l, int64_t layer, int64_t head, int64_t half) {
    return l.element_offset(layer - l.first_layer, head - l.first_kv_head, half, pos_begin) * elem;
  };
  // In page order, so that runs that continue each other merge.
  for (int64_t layer = l0; layer < l1; ++layer) {
    for (int64_t head = h0; head < h1; ++head) {
      for (int64_t half = 0; half < 2; ++half) {
        const CopyRun r{offset(src, layer, head, half), offset(dst, layer, head, half), run_bytes};
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

std::vector<bool> SliceWriters(std::span<const PageLayout> senders) {
  std::vector<bool> out(senders.size(), true);
  for (size_t i = 0; i < senders.size(); ++i) {
    for (size_t j = 0; j < i && out[i]; ++j) {
      const PageLayout &a = senders[i], &b = senders[j];
      if (a.first_layer == b.first_layer && a.num_layers == b.num_layers &&
          a.first_kv_head == b.first_kv_head && a.num_kv_heads == b.num_kv_heads) {
        out[i] = false;
      }
    }
  }
  return out;
}

absl::Status CheckSliceCover(std::span<const PageLayout> senders, const PageLayout& receiver) {
  const std::vector<bool> writers = SliceWriters(senders);
  const auto holds = [](const PageLayout& l, int64_t layer, int64_t head) {
    return layer >= l.first_layer && layer < l.first_layer + l.num_layers &&
           head >= l.first_kv_head && head < l.first_kv_head + l.num_kv_heads;
  };
  for (int64_t layer = receiver.first_layer; layer < receiver.first_layer + receiver.num_layers;
       ++layer) {
    for (int64_t head = receiver.first_kv_head;
         head < receiver.first_kv_head + receiver.num_kv_heads; ++head) {
      int writing = 0;
      for (size_t i = 0; i < senders.size(); ++i)
        writing += writers[i] && holds(senders[i], layer, head);
      if (writing != 1) {
        return absl::FailedPreconditionError(StrCat(
            writing, " of the sender's ranks hold layer ", layer, " KV head ", head,
            " of the receiver's rank ", receiver.pp_rank * receiver.tp_size + receiver.tp_rank,
            "; exactly one must: the two groups do not serve the same model's layers and "
            "heads"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace baton::kvcache
