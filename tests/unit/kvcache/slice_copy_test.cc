// SliceCopyRuns against an element-by-element oracle: every element of a source page is
// tagged with its model coordinates (layer, K or V, position, KV head, lane); after the
// runs are applied, each destination element holds exactly the tag its coordinates call
// for where the source holds them, and is untouched elsewhere. Over every pair of
// slicings (TP 1/2/4/8 with replication, PP 1/2/3), the source ranks together write each
// destination element exactly once per replica.
#include "kvcache/slice_copy.h"

#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace baton::kvcache {
namespace {

constexpr int64_t kLayers = 5, kHeads = 4, kHeadDim = 3, kBlock = 4;
constexpr uint32_t kUntouched = 0xffffffffu;

// One rank's layout, cut as model/shard.h cuts: contiguous layer stages (the first ones
// one longer), KV heads split, or replicated when tp exceeds them.
PageLayout Slice(int tp, int tr, int pp, int pr) {
  PageLayout l;
  l.head_dim = kHeadDim;
  l.block_size = kBlock;
  l.tp_rank = tr;
  l.tp_size = tp;
  l.pp_rank = pr;
  l.pp_size = pp;
  const int64_t base = kLayers / pp, extra = kLayers % pp;
  l.first_layer = pr * base + std::min<int64_t>(pr, extra);
  l.num_layers = base + (pr < extra ? 1 : 0);
  if (tp <= kHeads) {
    l.num_kv_heads = kHeads / tp;
    l.first_kv_head = tr * l.num_kv_heads;
  } else {
    l.num_kv_heads = 1;
    l.first_kv_head = tr / (tp / kHeads);
  }
  return l;
}

uint32_t Tag(int64_t layer, int64_t half, int64_t pos, int64_t head, int64_t d) {
  return static_cast<uint32_t>(((((layer * 2 + half) * kBlock + pos) * kHeads + head) * kHeadDim) +
                               d);
}

// Index of (model layer, half, pos, model head, d) in a page of `l`.
int64_t Index(const PageLayout& l, int64_t layer, int64_t half, int64_t pos, int64_t head,
              int64_t d) {
  return (((layer - l.first_layer) * 2 + half) * l.block_size + pos) * l.num_kv_heads * l.head_dim +
         (head - l.first_kv_head) * l.head_dim + d;
}

bool Holds(const PageLayout& l, int64_t layer, int64_t head) {
  return layer >= l.first_layer && layer < l.first_layer + l.num_layers &&
         head >= l.first_kv_head && head < l.first_kv_head + l.num_kv_heads;
}

std::vector<uint32_t> SourcePage(const PageLayout& l) {
  std::vector<uint32_t> page(static_cast<size_t>(l.elements_per_block()));
  for (int64_t layer = l.first_layer; layer < l.first_layer + l.num_layers; ++layer)
    for (int64_t half = 0; half < 2; ++half)
      for (int64_t pos = 0; pos < kBlock; ++pos)
        for (int64_t h = l.first_kv_head; h < l.first_kv_head + l.num_kv_heads; ++h)
          for (int64_t d = 0; d < kHeadDim; ++d)
            page[Index(l, layer, half, pos, h, d)] = Tag(layer, half, pos, h, d);
  return page;
}

// Applies the runs, checking each stays inside both pages.
void Apply(const std::vector<CopyRun>& runs, const std::vector<uint32_t>& src,
           std::vector<uint32_t>* dst) {
  for (const CopyRun& r : runs) {
    ASSERT_GT(r.bytes, 0);
    ASSERT_EQ(r.bytes % 4, 0);
    ASSERT_LE(r.src_offset + r.bytes, static_cast<int64_t>(src.size() * 4));
    ASSERT_LE(r.dst_offset + r.bytes, static_cast<int64_t>(dst->size() * 4));
    std::memcpy(reinterpret_cast<char*>(dst->data()) + r.dst_offset,
                reinterpret_cast<const char*>(src.data()) + r.src_offset, r.bytes);
  }
}

TEST(SliceCopy, EqualSlicesAreOneRunOfTheWholePage) {
  for (const PageLayout& l : {Slice(1, 0, 1, 0), Slice(2, 1, 1, 0), Slice(2, 0, 3, 2)}) {
    const std::vector<CopyRun> runs = SliceCopyRuns(l, l);
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0], (CopyRun{0, 0, l.page_bytes()}));
  }
}

TEST(SliceCopy, EveryPairOfSlicingsMovesEachElementToItsPlace) {
  const int tps[] = {1, 2, 4, 8};
  const int pps[] = {1, 2, 3};
  for (int stp : tps)
    for (int spp : pps)
      for (int dtp : tps)
        for (int dpp : pps) {
          for (int dr = 0; dr < dtp * dpp; ++dr) {
            const PageLayout dst = Slice(dtp, dr % dtp, dpp, dr / dtp);
            ASSERT_TRUE(CheckSliceCompatible(dst, dst).ok());
            std::vector<int> writes(static_cast<size_t>(dst.elements_per_block()), 0);
            std::vector<uint32_t> got(writes.size(), kUntouched);
            for (int sr = 0; sr < stp * spp; ++sr) {
              const PageLayout src = Slice(stp, sr % stp, spp, sr / stp);
              // Source replicas of one head write the same bytes: take one replica per head.
              if (stp > kHeads && (sr % stp) % (stp / kHeads) != 0) continue;
              std::vector<uint32_t> mine(writes.size(), kUntouched);
              Apply(SliceCopyRuns(src, dst), SourcePage(src), &mine);
              for (size_t i = 0; i < mine.size(); ++i) {
                if (mine[i] != kUntouched) {
                  ++writes[i];
                  got[i] = mine[i];
                }
              }
              // Untouched exactly where the source does not hold the element.
              for (int64_t layer = dst.first_layer; layer < dst.first_layer + dst.num_layers;
                   ++layer)
                for (int64_t h = dst.first_kv_head; h < dst.first_kv_head + dst.num_kv_heads; ++h)
                  for (int64_t half = 0; half < 2; ++half)
                    for (int64_t pos = 0; pos < kBlock; ++pos)
                      for (int64_t d = 0; d < kHeadDim; ++d) {
                        const uint32_t v = mine[Index(dst, layer, half, pos, h, d)];
                        if (Holds(src, layer, h)) {
                          ASSERT_EQ(v, Tag(layer, half, pos, h, d))
                              << "src tp" << stp << "pp" << spp << " r" << sr << " -> dst tp" << dtp
                              << "pp" << dpp << " r" << dr;
                        } else {
                          ASSERT_EQ(v, kUntouched);
                        }
                      }
            }
            for (size_t i = 0; i < writes.size(); ++i) {
              ASSERT_EQ(writes[i], 1) << "element " << i << " of dst tp" << dtp << "pp" << dpp
                                      << " r" << dr << " from src tp" << stp << "pp" << spp;
            }
          }
        }
}

TEST(SliceCopy, SomePositionsOfSomeLayers) {
  const PageLayout src = Slice(1, 0, 1, 0);
  const PageLayout dst = Slice(2, 1, 2, 1);  // layers 3..4, heads 2..3
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t p0 = rng() % (kBlock + 1), p1 = p0 + rng() % (kBlock - p0 + 1);
    const int64_t la = rng() % (kLayers + 1), lb = la + rng() % (kLayers - la + 1);
    std::vector<uint32_t> got(static_cast<size_t>(dst.elements_per_block()), kUntouched);
    Apply(SliceCopyRuns(src, dst, la, lb, p0, p1), SourcePage(src), &got);
    for (int64_t layer = dst.first_layer; layer < dst.first_layer + dst.num_layers; ++layer)
      for (int64_t h = dst.first_kv_head; h < dst.first_kv_head + dst.num_kv_heads; ++h)
        for (int64_t half = 0; half < 2; ++half)
          for (int64_t pos = 0; pos < kBlock; ++pos)
            for (int64_t d = 0; d < kHeadDim; ++d) {
              const bool in = layer >= la && layer < lb && pos >= p0 && pos < p1;
              ASSERT_EQ(got[Index(dst, layer, half, pos, h, d)],
                        in ? Tag(layer, half, pos, h, d) : kUntouched);
            }
  }
}

TEST(SliceCopy, DisjointSlicesShareNothing) {
  EXPECT_TRUE(SliceCopyRuns(Slice(2, 0, 1, 0), Slice(2, 1, 1, 0)).empty());
  EXPECT_TRUE(SliceCopyRuns(Slice(1, 0, 2, 0), Slice(1, 0, 2, 1)).empty());
}

TEST(SliceCopy, PagesOfDifferentModelsAreRefusedByField) {
  PageLayout a = Slice(1, 0, 1, 0), b = a;
  b.head_dim = 8;
  absl::Status s = CheckSliceCompatible(a, b);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("head_dim 3 (source) vs 8 (destination)"), std::string::npos) << s;
  b = a;
  b.dtype = "bf16";
  EXPECT_NE(CheckSliceCompatible(a, b).message().find("dtype"), std::string::npos);
  b = a;
  b.block_size = 16;
  EXPECT_NE(CheckSliceCompatible(a, b).message().find("block_size"), std::string::npos);
}

}  // namespace
}  // namespace baton::kvcache
