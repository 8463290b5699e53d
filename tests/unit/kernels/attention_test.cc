#include "kernels/cpu/attention.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/matmul.h"

namespace baton::cpu {
namespace {

// Paged K/V with a shuffled block table, laid out as the engine's pages are
// (kvcache/page_layout.h): per page, per KV head, its K rows then its V rows, in f32 or
// bf16. And a float64 reference of one query, computed from the values the pages hold.
struct Pages {
  int64_t block_size = 16, kv_heads = 2, head_dim = 64, blocks = 0;
  KvDtype dtype = KvDtype::kF32;
  std::vector<float> kv;   // the values the pages hold, as floats
  std::vector<Bf16> bf16;  // bf16 pages: those values' bits
  std::vector<int32_t> table;

  Pages(int64_t head_dim_in, int64_t positions, std::mt19937* rng, int64_t block_size_in = 16,
        int64_t kv_heads_in = 2, KvDtype dtype_in = KvDtype::kF32)
      : block_size(block_size_in), kv_heads(kv_heads_in), head_dim(head_dim_in), dtype(dtype_in) {
    blocks = (positions + block_size - 1) / block_size + 3;
    std::normal_distribution<float> d(0.0f, 1.0f);
    kv.resize(blocks * PerBlock());
    for (float& x : kv) x = d(*rng);
    if (dtype == KvDtype::kBf16) {
      // Any bf16 values will do: the upper halves of the random floats. The reference then
      // reads exactly what the pages hold.
      bf16.resize(kv.size());
      for (size_t i = 0; i < kv.size(); ++i) {
        bf16[i].bits = static_cast<uint16_t>(std::bit_cast<uint32_t>(kv[i]) >> 16);
        kv[i] = std::bit_cast<float>(uint32_t{bf16[i].bits} << 16);
      }
    }
    table.resize(blocks);
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), *rng);
  }
  int64_t Rows() const { return block_size * head_dim; }  // one head's K (or V) in a page
  int64_t PerBlock() const { return kv_heads * 2 * Rows(); }
  PagedKvView View() const {
    const void* k = dtype == KvDtype::kBf16 ? static_cast<const void*>(bf16.data())
                                            : static_cast<const void*>(kv.data());
    const void* v = dtype == KvDtype::kBf16 ? static_cast<const void*>(bf16.data() + Rows())
                                            : static_cast<const void*>(kv.data() + Rows());
    return {.k = k,
            .v = v,
            .dtype = dtype,
            .block_stride = PerBlock(),
            .block_size = block_size,
            .head_stride = 2 * Rows(),
            .head_dim = head_dim};
  }
  // The same values as f32 pages (for bf16 pages: widened).
  PagedKvView F32View() const {
    return {.k = kv.data(),
            .v = kv.data() + Rows(),
            .dtype = KvDtype::kF32,
            .block_stride = PerBlock(),
            .block_size = block_size,
            .head_stride = 2 * Rows(),
            .head_dim = head_dim};
  }
  // Where row t of head h starts in kv (and bf16): its K (half 0) or V (half 1).
  int64_t RowStart(int half, int64_t t, int64_t h) const {
    return table[t / block_size] * PerBlock() + (h * 2 + half) * Rows() +
           (t % block_size) * head_dim;
  }
  const float* Row(int half, int64_t t, int64_t h) const {
    return kv.data() + RowStart(half, t, h);
  }
  // Sets row t of head h to `values` (which bf16 pages must be able to hold exactly).
  void SetRow(int half, int64_t t, int64_t h, const float* values) {
    const int64_t at = RowStart(half, t, h);
    for (int64_t i = 0; i < head_dim; ++i) {
      kv[at + i] = values[i];
      if (dtype == KvDtype::kBf16) {
        bf16[at + i].bits = static_cast<uint16_t>(std::bit_cast<uint32_t>(values[i]) >> 16);
      }
    }
  }
  std::vector<double> Reference(const float* q, int64_t pos, int64_t h, double scale) const {
    std::vector<double> s(pos + 1), out(head_dim, 0.0);
    double max = -1e300, sum = 0;
    for (int64_t t = 0; t <= pos; ++t) {
      double dot = 0;
      for (int64_t i = 0; i < head_dim; ++i) dot += double{q[i]} * Row(0, t, h)[i];
      s[t] = dot * scale;
      max = std::max(max, s[t]);
    }
    for (double& x : s) sum += (x = std::exp(x - max));
    for (int64_t t = 0; t <= pos; ++t) {
      for (int64_t i = 0; i < head_dim; ++i) out[i] += s[t] / sum * Row(1, t, h)[i];
    }
    return out;
  }
};

constexpr KvDtype kDtypes[] = {KvDtype::kF32, KvDtype::kBf16};
const char* Name(KvDtype d) { return d == KvDtype::kBf16 ? "bf16" : "f32"; }

constexpr internal::Isa kIsas[] = {internal::Isa::kScalar, internal::Isa::kAvx2,
                                   internal::Isa::kAvx512, internal::Isa::kAvx512Bf16};

// Head sizes of every kernel path: multiples of 16 (the AVX-512 kernel) and odd multiples
// of 8 (the AVX2 kernel on every vector ISA), one or several V strips of the AVX2 kernel
// (64 columns each: 136 ends in a one-chunk strip), up to 256.
constexpr int64_t kHeadDims[] = {8, 16, 24, 32, 40, 64, 128, 136, 256};

// Queries of two spreads: the softmax is peaky already at 2; at 40 most keys' scores lie
// far more than 87 below the max, so exp's whole range down to 0 is used. There the
// scores, hundreds in size, carry rounding errors of about 1e-5 relative in the weights on
// every path (the scalar one too), hence the looser bound; an exp that went wrong below
// its range would miss it by orders of magnitude.
struct QuerySpread {
  float stddev;
  double max_error;  // relative, in the 2-norm over the head
};
constexpr QuerySpread kSpreads[] = {{2.0f, 1e-6}, {40.0f, 1e-4}};

TEST(AttentionTest, EveryIsaMatchesAFloat64Reference) {
  std::mt19937 rng(5);
  for (const KvDtype dtype : kDtypes) {
    for (const int64_t head_dim : kHeadDims) {
      for (const QuerySpread spread : kSpreads) {
        const int64_t positions = 150;
        Pages pages(head_dim, positions, &rng, 16, 2, dtype);
        std::vector<float> q(head_dim), out(head_dim), scores(positions);
        std::normal_distribution<float> d(0.0f, spread.stddev);
        for (float& x : q) x = d(rng);
        const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
        for (const auto isa : kIsas) {
          if (!internal::IsaSupported(isa)) continue;
          internal::SetIsaForTesting(isa);
          for (const int64_t pos : {0, 1, 7, 8, 9, 15, 16, 17, 31, 63, 100, 149}) {
            for (int64_t h = 0; h < pages.kv_heads; ++h) {
              AttendOneQuery(q.data(), pos, h, pages.table.data(), pages.View(), scale,
                             scores.data(), out.data());
              const std::vector<double> ref = pages.Reference(q.data(), pos, h, scale);
              double err = 0, norm = 0;
              for (int64_t i = 0; i < head_dim; ++i) {
                err += (out[i] - ref[i]) * (out[i] - ref[i]);
                norm += ref[i] * ref[i];
              }
              EXPECT_LT(std::sqrt(err / norm), spread.max_error)
                  << Name(dtype) << " " << internal::IsaName(isa) << " head_dim " << head_dim
                  << " q spread " << spread.stddev << " pos " << pos;
            }
          }
        }
        internal::ResetIsaForTesting();
      }
    }
  }
}

// bf16 pages are read by widening each value exactly, and all arithmetic is then the f32
// path's: on every ISA, attention over bf16 pages equals, bit for bit, attention over f32
// pages holding the same values.
TEST(AttentionTest, Bf16PagesGiveTheBitsOfF32PagesWithTheirValues) {
  std::mt19937 rng(13);
  std::normal_distribution<float> d(0.0f, 1.5f);
  for (const int64_t head_dim : {8, 24, 64, 128, 256}) {
    Pages pages(head_dim, 100, &rng, 16, 3, KvDtype::kBf16);
    const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    const int64_t count = 3;
    std::vector<float> q(count * head_dim), a(count * head_dim), b(count * head_dim);
    std::vector<float> scores(count * 100);
    for (float& x : q) x = d(rng);
    for (const auto isa : kIsas) {
      if (!internal::IsaSupported(isa)) continue;
      internal::SetIsaForTesting(isa);
      for (const int64_t pos : {0, 16, 40, 99}) {
        AttendQueries(q.data(), count, pos, 2, pages.table.data(), pages.View(), scale,
                      scores.data(), a.data());
        AttendQueries(q.data(), count, pos, 2, pages.table.data(), pages.F32View(), scale,
                      scores.data(), b.data());
        ASSERT_EQ(a, b) << internal::IsaName(isa) << " head_dim " << head_dim << " pos " << pos;
      }
    }
    internal::ResetIsaForTesting();
  }
}

// A query's result depends on nothing but its own inputs: computing it again after other
// queries, with dirty scratch, gives the same bits.
TEST(AttentionTest, AQueryIsBitIdenticalWhateverRanBefore) {
  for (const KvDtype dtype : kDtypes) {
    std::mt19937 rng(9);
    Pages pages(64, 90, &rng, 16, 2, dtype);
    std::vector<float> q(64), other(64), a(64), b(64), scores(90, 123.0f);
    std::normal_distribution<float> d(0.0f, 1.0f);
    for (float& x : q) x = d(rng);
    for (float& x : other) x = d(rng);
    AttendOneQuery(q.data(), 77, 1, pages.table.data(), pages.View(), 0.125f, scores.data(),
                   a.data());
    AttendOneQuery(other.data(), 89, 0, pages.table.data(), pages.View(), 0.125f, scores.data(),
                   b.data());
    AttendOneQuery(q.data(), 77, 1, pages.table.data(), pages.View(), 0.125f, scores.data(),
                   b.data());
    EXPECT_EQ(a, b) << Name(dtype);
  }
}

// A query at pos reads no key or value after pos: its result is the same bits whatever
// the rows after it hold (here NaN), so a token computed while the sequence is still
// short equals the same token computed once more keys are written (a prefill chunk
// against decode). Positions on both sides of the 8- and 16-key tiles' ends.
TEST(AttentionTest, RowsAfterPosDoNotChangeTheResult) {
  std::mt19937 rng(17);
  std::normal_distribution<float> d(0.0f, 1.5f);
  for (const KvDtype dtype : kDtypes) {
    for (const int64_t head_dim : kHeadDims) {
      for (const int64_t block_size : {16, 5}) {
        const int64_t positions = 40;
        Pages pages(head_dim, positions, &rng, block_size, /*kv_heads_in=*/2, dtype);
        const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
        const int64_t count = 3;
        std::vector<float> q(count * head_dim), before(count * head_dim), after(count * head_dim);
        std::vector<float> scores(count * positions);
        for (float& x : q) x = d(rng);
        const std::vector<float> nans(head_dim, NAN);
        for (const auto isa : kIsas) {
          if (!internal::IsaSupported(isa)) continue;
          internal::SetIsaForTesting(isa);
          for (const int64_t pos : {0, 6, 7, 8, 9, 15, 16, 17, 23, 30}) {
            Pages poisoned = pages;
            for (int64_t t = pos + 1; t < positions; ++t) {
              for (int64_t h = 0; h < poisoned.kv_heads; ++h) {
                poisoned.SetRow(0, t, h, nans.data());
                poisoned.SetRow(1, t, h, nans.data());
              }
            }
            for (int64_t h = 0; h < pages.kv_heads; ++h) {
              AttendQueries(q.data(), count, pos, h, pages.table.data(), pages.View(), scale,
                            scores.data(), before.data());
              AttendQueries(q.data(), count, pos, h, poisoned.table.data(), poisoned.View(), scale,
                            scores.data(), after.data());
              ASSERT_EQ(before, after)
                  << Name(dtype) << " " << internal::IsaName(isa) << " head_dim " << head_dim
                  << " block_size " << block_size << " pos " << pos;
            }
          }
        }
        internal::ResetIsaForTesting();
      }
    }
  }
}

// The result depends on the values of the keys, not on how pages hold them: the same
// rows in pages of another size (which the kernels walk differently: 8-key tiles inside a
// page or across pages) give the same bits.
TEST(AttentionTest, TheBlockSizeDoesNotChangeTheResult) {
  std::mt19937 rng(23);
  std::normal_distribution<float> d(0.0f, 1.5f);
  for (const KvDtype dtype : kDtypes) {
    for (const int64_t head_dim : kHeadDims) {
      const int64_t positions = 50;
      const Pages pages(head_dim, positions, &rng, /*block_size_in=*/16, /*kv_heads_in=*/2, dtype);
      std::vector<Pages> others;
      for (const int64_t block_size : {8, 5, 1, 32}) {
        others.emplace_back(head_dim, positions, &rng, block_size, /*kv_heads_in=*/2, dtype);
        for (int64_t t = 0; t < positions; ++t) {
          for (int half = 0; half < 2; ++half) {
            for (int64_t h = 0; h < 2; ++h) others.back().SetRow(half, t, h, pages.Row(half, t, h));
          }
        }
      }
      const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
      std::vector<float> q(head_dim), want(head_dim), got(head_dim), scores(positions);
      for (float& x : q) x = d(rng);
      for (const auto isa : kIsas) {
        if (!internal::IsaSupported(isa)) continue;
        internal::SetIsaForTesting(isa);
        for (const int64_t pos : {0, 7, 8, 15, 16, 23, 31, 49}) {
          AttendOneQuery(q.data(), pos, 1, pages.table.data(), pages.View(), scale, scores.data(),
                         want.data());
          for (const Pages& other : others) {
            AttendOneQuery(q.data(), pos, 1, other.table.data(), other.View(), scale, scores.data(),
                           got.data());
            ASSERT_EQ(got, want) << Name(dtype) << " " << internal::IsaName(isa) << " head_dim "
                                 << head_dim << " block_size " << other.block_size << " pos "
                                 << pos;
          }
        }
      }
      internal::ResetIsaForTesting();
    }
  }
}

// A group of queries that share a KV head gives each query exactly AttendOneQuery's bits,
// for head sizes that each kernel passes several queries at once (8 and 16 in fours on
// AVX2, 24 and 32 in pairs; 64 and 128 on AVX-512) or not, any group size and block sizes
// that do and do not line up with the 8- and 16-key tiles, on f32 and bf16 pages and every
// vector ISA this CPU has.
TEST(AttentionTest, AGroupOfQueriesEqualsEachQueryAloneBitForBit) {
  std::mt19937 rng(11);
  std::normal_distribution<float> d(0.0f, 1.5f);
  for (const auto isa : {internal::Isa::kAvx2, internal::Isa::kAvx512}) {
    if (!internal::IsaSupported(isa)) continue;
    internal::SetIsaForTesting(isa);
    for (const KvDtype dtype : kDtypes) {
      for (const int64_t head_dim : {8, 16, 24, 32, 40, 64, 128, 136, 256}) {
        for (const int64_t block_size : {16, 5, 1, 32}) {
          const int64_t positions = 70;
          Pages pages(head_dim, positions, &rng, block_size, /*kv_heads_in=*/3, dtype);
          const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
          for (const int64_t count : {1, 2, 3, 4, 5, 7, 8}) {
            std::vector<float> q(count * head_dim), group_out(count * head_dim), alone(head_dim);
            std::vector<float> scores(count * positions, -7.0f);
            for (float& x : q) x = d(rng);
            for (const int64_t pos : {0, 15, 16, 17, 44, 69}) {
              const int64_t kv_head = (count + pos) % 3;
              AttendQueries(q.data(), count, pos, kv_head, pages.table.data(), pages.View(), scale,
                            scores.data(), group_out.data());
              for (int64_t i = 0; i < count; ++i) {
                AttendOneQuery(q.data() + i * head_dim, pos, kv_head, pages.table.data(),
                               pages.View(), scale, scores.data(), alone.data());
                const std::vector<float> got(group_out.begin() + i * head_dim,
                                             group_out.begin() + (i + 1) * head_dim);
                ASSERT_EQ(got, alone) << internal::IsaName(isa) << " " << Name(dtype)
                                      << " head_dim " << head_dim << " block_size " << block_size
                                      << " count " << count << " query " << i << " pos " << pos;
                const std::vector<double> ref =
                    pages.Reference(q.data() + i * head_dim, pos, kv_head, scale);
                for (int64_t j = 0; j < head_dim; ++j) ASSERT_NEAR(got[j], ref[j], 1e-4);
              }
            }
          }
        }
      }
    }
  }
  internal::ResetIsaForTesting();
}

}  // namespace
}  // namespace baton::cpu
