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

// Index of (model layer, half, pos, model head, d) in a page of `l`: head-major,
// [layer][head][K, V][position][head_dim].
int64_t Index(const PageLayout& l, int64_t layer, int64_t half, int64_t pos, int64_t head,
              int64_t d) {
  return ((((layer - l.first_layer) * l.num_kv_heads + (head - l.first_kv_head)) * 2 + half) *
              l.block_size +
          pos) *
             l.head_dim +
         d;
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

// What the head-major page is for: a head range of whole pages is one run per layer
// whatever the two TP sizes, not one per position.
TEST(SliceCopy, DifferentTensorSlicesAreOneRunPerLayer) {
  const PageLayout whole = Slice(1, 0, 1, 0);
  for (int tp : {2, 4}) {
    for (int r = 0; r < tp; ++r) {
      const PageLayout part = Slice(tp, r, 1, 0);
      const int64_t run = part.layer_elements() * DtypeBytes(part.dtype);
      for (const auto& runs : {SliceCopyRuns(part, whole), SliceCopyRuns(whole, part)}) {
        ASSERT_EQ(static_cast<int64_t>(runs.size()), kLayers) << "tp" << tp << " r" << r;
        for (const CopyRun& c : runs) EXPECT_EQ(c.bytes, run);
      }
    }
  }
  // Some positions only: a K run and a V run per head.
  EXPECT_EQ(static_cast<int64_t>(SliceCopyRuns(Slice(2, 0, 1, 0), whole, 0, kLayers, 1, 3).size()),
            kLayers * (kHeads / 2) * 2);
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
  s = CheckSliceCompatible(a, b);
  EXPECT_NE(s.message().find("dtype f32 (source) vs bf16 (destination)"), std::string::npos) << s;
  EXPECT_NE(s.message().find("--kv-cache-dtype"), std::string::npos) << s;
  b = a;
  b.block_size = 16;
  EXPECT_NE(CheckSliceCompatible(a, b).message().find("block_size"), std::string::npos);
}

// ---- SliceWriters and CheckSliceCover ----

// A layout of layers [first_layer, first_layer + layers) and KV heads [first_head,
// first_head + heads) of the model of this file.
PageLayout Cut(int64_t first_layer, int64_t layers, int64_t first_head, int64_t heads) {
  PageLayout l;
  l.head_dim = kHeadDim;
  l.block_size = kBlock;
  l.first_layer = first_layer;
  l.num_layers = layers;
  l.first_kv_head = first_head;
  l.num_kv_heads = heads;
  return l;
}

TEST(SliceWriters, ReplicasOfOneSliceWriteOnce) {
  // tp=4 over a model of 2 KV heads: ranks 0 and 1 hold head 0, ranks 2 and 3 head 1.
  std::vector<PageLayout> group;
  for (int r = 0; r < 4; ++r) {
    PageLayout l = Cut(0, kLayers, r / 2, 1);
    l.tp_rank = r;
    l.tp_size = 4;
    group.push_back(l);
  }
  EXPECT_EQ(SliceWriters(group), (std::vector<bool>{true, false, true, false}));

  // The same with this file's model (4 heads) at tp=8, over two pipeline stages.
  std::vector<PageLayout> tp8pp2;
  for (int pr = 0; pr < 2; ++pr)
    for (int tr = 0; tr < 8; ++tr) tp8pp2.push_back(Slice(8, tr, 2, pr));
  const std::vector<bool> writers = SliceWriters(tp8pp2);
  ASSERT_EQ(writers.size(), 16u);
  for (size_t i = 0; i < writers.size(); ++i) EXPECT_EQ(writers[i], i % 2 == 0) << i;
}

TEST(SliceWriters, DistinctSlicesAllWrite) {
  std::vector<PageLayout> tp4;
  for (int r = 0; r < 4; ++r) tp4.push_back(Slice(4, r, 1, 0));
  EXPECT_EQ(SliceWriters(tp4), (std::vector<bool>{true, true, true, true}));

  std::vector<PageLayout> tp2pp3;
  for (int pr = 0; pr < 3; ++pr)
    for (int tr = 0; tr < 2; ++tr) tp2pp3.push_back(Slice(2, tr, 3, pr));
  EXPECT_EQ(SliceWriters(tp2pp3), std::vector<bool>(6, true));

  // Same heads, other layers: not replicas.
  const std::vector<PageLayout> stages = {Cut(0, 3, 0, kHeads), Cut(3, 2, 0, kHeads)};
  EXPECT_EQ(SliceWriters(stages), (std::vector<bool>{true, true}));

  EXPECT_TRUE(SliceWriters({}).empty());
  const std::vector<PageLayout> one = {Slice(1, 0, 1, 0)};
  EXPECT_EQ(SliceWriters(one), std::vector<bool>{true});
}

TEST(CheckSliceCover, TensorSlicesCoverEitherWay) {
  const std::vector<PageLayout> tp2 = {Slice(2, 0, 1, 0), Slice(2, 1, 1, 0)};
  const PageLayout tp1 = Slice(1, 0, 1, 0);
  EXPECT_TRUE(CheckSliceCover(tp2, tp1).ok()) << CheckSliceCover(tp2, tp1);
  const std::vector<PageLayout> whole = {tp1};
  for (const PageLayout& r : tp2) EXPECT_TRUE(CheckSliceCover(whole, r).ok()) << r.tp_rank;
  // And TP4 into TP2.
  std::vector<PageLayout> tp4;
  for (int r = 0; r < 4; ++r) tp4.push_back(Slice(4, r, 1, 0));
  for (const PageLayout& r : tp2) EXPECT_TRUE(CheckSliceCover(tp4, r).ok()) << r.tp_rank;
}

TEST(CheckSliceCover, ReplicatedSendersCoverOnce) {
  // tp=8 over 4 heads: each head held twice, written by one of the two.
  std::vector<PageLayout> tp8;
  for (int r = 0; r < 8; ++r) tp8.push_back(Slice(8, r, 1, 0));
  EXPECT_TRUE(CheckSliceCover(tp8, Slice(1, 0, 1, 0)).ok());
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(CheckSliceCover(tp8, Slice(2, r, 1, 0)).ok()) << r;
}

TEST(CheckSliceCover, PipelineCutsCoverEachOther) {
  // 5 layers cut 3+2 on one side and 2+3 on the other.
  const std::vector<PageLayout> three_two = {Cut(0, 3, 0, kHeads), Cut(3, 2, 0, kHeads)};
  const std::vector<PageLayout> two_three = {Cut(0, 2, 0, kHeads), Cut(2, 3, 0, kHeads)};
  for (const PageLayout& r : two_three) {
    EXPECT_TRUE(CheckSliceCover(three_two, r).ok()) << CheckSliceCover(three_two, r);
  }
  for (const PageLayout& r : three_two) {
    EXPECT_TRUE(CheckSliceCover(two_three, r).ok()) << CheckSliceCover(two_three, r);
  }
  EXPECT_TRUE(CheckSliceCover(three_two, Cut(0, kLayers, 0, kHeads)).ok());
  // TP2 x PP3 senders into a TP1 x PP2 receiver.
  std::vector<PageLayout> tp2pp3;
  for (int pr = 0; pr < 3; ++pr)
    for (int tr = 0; tr < 2; ++tr) tp2pp3.push_back(Slice(2, tr, 3, pr));
  for (int pr = 0; pr < 2; ++pr) EXPECT_TRUE(CheckSliceCover(tp2pp3, Slice(1, 0, 2, pr)).ok());
}

TEST(CheckSliceCover, AMissingSliceIsNamed) {
  // Rank 0 of a TP2 group alone: heads 2 and 3 of the receiver have no writer.
  const std::vector<PageLayout> half = {Slice(2, 0, 1, 0)};
  const absl::Status s = CheckSliceCover(half, Slice(1, 0, 1, 0));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("0 of the sender's ranks hold layer 0 KV head 2"), std::string::npos)
      << s;
  // The receiver's rank that is short is named too.
  const absl::Status r1 = CheckSliceCover(half, Slice(2, 1, 1, 0));
  EXPECT_EQ(r1.code(), absl::StatusCode::kFailedPrecondition) << r1;
  EXPECT_NE(r1.message().find("receiver's rank 1"), std::string::npos) << r1;
  // But rank 0 of the receiver is covered by it.
  EXPECT_TRUE(CheckSliceCover(half, Slice(2, 0, 1, 0)).ok());

  // A pipeline stage missing: layers 3 and 4.
  const std::vector<PageLayout> first_stage = {Cut(0, 3, 0, kHeads)};
  const absl::Status p = CheckSliceCover(first_stage, Cut(0, kLayers, 0, kHeads));
  EXPECT_EQ(p.code(), absl::StatusCode::kFailedPrecondition) << p;
  EXPECT_NE(p.message().find("layer 3 KV head 0"), std::string::npos) << p;

  // No senders at all.
  const absl::Status none = CheckSliceCover({}, Slice(1, 0, 1, 0));
  EXPECT_EQ(none.code(), absl::StatusCode::kFailedPrecondition) << none;
  EXPECT_NE(none.message().find("layer 0 KV head 0"), std::string::npos) << none;
}

TEST(CheckSliceCover, OverlappingWritersFailThoughTheBytesWouldSum) {
  // Heads [0, 2) and [1, 3): four heads' worth of bytes, as a 4-head receiver holds, but
  // head 1 has two writers (and head 3 none).
  const std::vector<PageLayout> overlap = {Cut(0, kLayers, 0, 2), Cut(0, kLayers, 1, 2)};
  const PageLayout receiver = Cut(0, kLayers, 0, kHeads);
  ASSERT_EQ(overlap[0].page_bytes() + overlap[1].page_bytes(), receiver.page_bytes());
  const absl::Status s = CheckSliceCover(overlap, receiver);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("2 of the sender's ranks hold layer 0 KV head 1"), std::string::npos)
      << s;

  // Overlapping pipeline stages: layers [0, 3) and [2, 5), same heads.
  const std::vector<PageLayout> stages = {Cut(0, 3, 0, kHeads), Cut(2, 3, 0, kHeads)};
  const absl::Status p = CheckSliceCover(stages, receiver);
  EXPECT_EQ(p.code(), absl::StatusCode::kFailedPrecondition) << p;
  EXPECT_NE(p.message().find("layer 2 KV head 0"), std::string::npos) << p;
}

}  // namespace
}  // namespace baton::kvcache
