// The GPU's paged KV write, decode and prefill attention against a float64 reference on
// the host, over page tables that are not contiguous, in f32 and bf16 pages, with contexts
// that end inside a page, on a split boundary and past several splits, and prefill chunks
// after cached prefixes. Skipped without a GPU.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/paged_attention.cuh"
#include "tests/gpu/gpu_test_util.h"

namespace baton::kernels::cuda {
namespace {

using ::baton::testing::Download;
using ::baton::testing::Upload;

struct Shape {
  int kv_heads, group, head_dim, block_size = 16, layers = 2, layer = 1;
  int q_heads() const { return kv_heads * group; }
  int64_t rows() const { return static_cast<int64_t>(block_size) * head_dim; }
  int64_t head_stride() const { return 2 * rows(); }
  int64_t page_stride() const { return layers * kv_heads * head_stride(); }
};

// Sequences' pages on the device: contexts of the given lengths, in shuffled pages
// poisoned with NaN, every position's K and V written by WritePagedKv from rows that hold
// a token's K then its V (a row stride of twice the K width, as in fused qkv rows); `held`
// is the pool as read back, so that bf16 rounding is the reference's too.
struct Pool {
  Shape s;
  KvType type;
  std::vector<int32_t> tables;  // [seq][max_blocks]
  int max_blocks = 0;
  PagedKv kv;
  std::vector<float> held;
  void* device = nullptr;
  int32_t* device_tables = nullptr;

  Pool(const Shape& shape, KvType t, const std::vector<int32_t>& contexts, std::mt19937& rng)
      : s(shape), type(t) {
    std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
    const int num_seqs = static_cast<int>(contexts.size());
    const int max_context = *std::max_element(contexts.begin(), contexts.end());
    max_blocks = (max_context + s.block_size - 1) / s.block_size;
    const int num_pages = num_seqs * max_blocks + 3;
    std::vector<int32_t> pages(num_pages);
    std::iota(pages.begin(), pages.end(), 0);
    std::shuffle(pages.begin(), pages.end(), rng);  // tables that are not contiguous
    tables.assign(pages.begin(), pages.begin() + num_seqs * max_blocks);
    const int tokens = std::accumulate(contexts.begin(), contexts.end(), 0);
    const int64_t width = static_cast<int64_t>(s.kv_heads) * s.head_dim;  // one token's K
    std::vector<float> kv_rows(static_cast<size_t>(std::max(tokens, 1)) * 2 * width);
    for (float& x : kv_rows) x = uni(rng);
    std::vector<int32_t> slot_pages, slot_rows;
    for (int q = 0; q < num_seqs; ++q) {
      for (int p = 0; p < contexts[q]; ++p) {
        slot_pages.push_back(tables[q * max_blocks + p / s.block_size]);
        slot_rows.push_back(p % s.block_size);
      }
    }
    const size_t elem = type == KvType::kF32 ? 4 : 2;
    const int64_t pool_elems = num_pages * s.page_stride();
    EXPECT_EQ(cudaMalloc(&device, pool_elems * elem), cudaSuccess);
    EXPECT_EQ(cudaMemset(device, 0xFF, pool_elems * elem), cudaSuccess);  // NaN if unwritten
    kv.type = type;
    kv.base = static_cast<char*>(device) + s.layer * s.kv_heads * s.head_stride() * elem;
    kv.page_stride = s.page_stride();
    kv.head_stride = s.head_stride();
    kv.rows = s.rows();
    kv.block_size = s.block_size;
    kv.head_dim = s.head_dim;
    float* drows = Upload(kv_rows);
    int32_t *dsp = Upload(slot_pages), *dsr = Upload(slot_rows);
    EXPECT_EQ(
        WritePagedKv(kv, s.kv_heads, drows, drows + width, 2 * width, dsp, dsr, tokens, nullptr),
        cudaSuccess);
    if (type == KvType::kF32) {
      held = Download(static_cast<const float*>(device), pool_elems);
    } else {
      const auto raw = Download(static_cast<const __nv_bfloat16*>(device), pool_elems);
      held.resize(pool_elems);
      for (int64_t i = 0; i < pool_elems; ++i) held[i] = __bfloat162float(raw[i]);
    }
    for (void* p : {static_cast<void*>(drows), static_cast<void*>(dsp), static_cast<void*>(dsr)}) {
      cudaFree(p);
    }
    // The write put each token's row where the layout says, rounded once.
    for (int t = 0; t < tokens; ++t) {
      for (int h = 0; h < s.kv_heads; ++h) {
        for (int d = 0; d < s.head_dim; ++d) {
          for (int half = 0; half < 2; ++half) {
            const float want = kv_rows[(2 * t + half) * width + h * s.head_dim + d];
            const float got = at(slot_pages[t], h, half, slot_rows[t], d);
            EXPECT_EQ(got,
                      type == KvType::kF32 ? want : __bfloat162float(__float2bfloat16_rn(want)))
                << "token " << t << " head " << h << (half == 0 ? " K" : " V") << " dim " << d;
          }
        }
      }
    }
    device_tables = Upload(tables);
  }
  ~Pool() {
    cudaFree(device);
    cudaFree(device_tables);
  }

  float at(int page, int head, int half, int pos, int d) const {
    return held[page * s.page_stride() + (s.layer * s.kv_heads + head) * s.head_stride() +
                half * s.rows() + static_cast<int64_t>(pos) * s.head_dim + d];
  }

  // softmax(q . K[0..pos]^T * scale) . V[0..pos] of sequence `seq`, KV head `head`, in
  // float64: head_dim values.
  std::vector<double> Reference(const float* q, int seq, int head, int pos, float scale) const {
    std::vector<double> score(pos + 1);
    double m = -INFINITY;
    for (int t = 0; t <= pos; ++t) {
      const int page = tables[seq * max_blocks + t / s.block_size];
      double dot = 0;
      for (int d = 0; d < s.head_dim; ++d) {
        dot += static_cast<double>(q[d]) * at(page, head, 0, t % s.block_size, d);
      }
      score[t] = dot * scale;
      m = std::max(m, score[t]);
    }
    double sum = 0;
    for (double& x : score) sum += (x = std::exp(x - m));
    std::vector<double> out(s.head_dim, 0.0);
    for (int t = 0; t <= pos; ++t) {
      const int page = tables[seq * max_blocks + t / s.block_size];
      for (int d = 0; d < s.head_dim; ++d)
        out[d] += score[t] * at(page, head, 1, t % s.block_size, d);
    }
    for (double& x : out) x /= sum;
    return out;
  }
};

std::vector<float> RandomQueries(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> q(n);
  for (float& x : q) x = uni(rng);
  return q;
}

// DecodeAttention over contexts of `lens` (0: a padding sequence, which gets zeros), against
// the reference; then the last sequence alone must give the bits it gave in the batch. q
// rows are wider than the query heads (as in fused qkv rows), and sequence s's query and
// output are row num_seqs - 1 - s, not the batch order.
void CheckDecode(const Shape& s, KvType type, const std::vector<int32_t>& lens, uint32_t seed) {
  std::mt19937 rng(seed);
  const Pool pool(s, type, lens, rng);
  const int num_seqs = static_cast<int>(lens.size());
  const int max_context = *std::max_element(lens.begin(), lens.end());
  const int64_t width = static_cast<int64_t>(s.q_heads()) * s.head_dim;
  const int64_t q_stride = width + 32;
  std::vector<int32_t> q_rows(num_seqs);
  for (int seq = 0; seq < num_seqs; ++seq) q_rows[seq] = num_seqs - 1 - seq;
  const std::vector<float> q = RandomQueries(static_cast<size_t>(num_seqs * q_stride), rng);
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  float* dq = Upload(q);
  int32_t *dlens = Upload(lens), *drows = Upload(q_rows);
  void* workspace = nullptr;
  ASSERT_EQ(cudaMalloc(&workspace, DecodeAttentionWorkspaceBytes(num_seqs, s.q_heads(), s.head_dim,
                                                                 max_context)),
            cudaSuccess);
  const std::vector<float> poison(static_cast<size_t>(num_seqs * width), NAN);
  float *dout = Upload(poison), *dalone = Upload(poison);
  ASSERT_EQ(DecodeAttention(dq, q_stride, drows, pool.kv, pool.device_tables, pool.max_blocks,
                            dlens, num_seqs, s.q_heads(), s.kv_heads, max_context, scale, workspace,
                            dout, nullptr),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> out = Download(dout, poison.size());
  for (int seq = 0; seq < num_seqs; ++seq) {
    const int64_t row = q_rows[seq];
    for (int qh = 0; qh < s.q_heads(); ++qh) {
      const float* o = &out[row * width + qh * s.head_dim];
      if (lens[seq] == 0) {
        for (int d = 0; d < s.head_dim; ++d) ASSERT_EQ(o[d], 0.0f) << "seq " << seq << " dim " << d;
        continue;
      }
      const std::vector<double> want = pool.Reference(&q[row * q_stride + qh * s.head_dim], seq,
                                                      qh / s.group, lens[seq] - 1, scale);
      for (int d = 0; d < s.head_dim; ++d) {
        ASSERT_NEAR(o[d], want[d], 2e-5)
            << "seq " << seq << " (len " << lens[seq] << ") head " << qh << " dim " << d;
      }
    }
  }
  const int last = num_seqs - 1;
  ASSERT_EQ(
      DecodeAttention(dq, q_stride, drows + last, pool.kv,
                      pool.device_tables + last * pool.max_blocks, pool.max_blocks, dlens + last, 1,
                      s.q_heads(), s.kv_heads, max_context, scale, workspace, dalone, nullptr),
      cudaSuccess);
  const std::vector<float> alone = Download(dalone, poison.size());
  const int64_t last_row = q_rows[last] * width;
  for (int64_t i = 0; i < width; ++i) ASSERT_EQ(alone[last_row + i], out[last_row + i]) << i;
  for (void* p : {static_cast<void*>(dq), static_cast<void*>(dlens), static_cast<void*>(drows),
                  workspace, static_cast<void*>(dout), static_cast<void*>(dalone)}) {
    cudaFree(p);
  }
}

// PrefillAttention over chunks of (cached, new) positions per sequence: each new token
// attends causally to its whole context. q rows are wider than the query heads (as in
// fused qkv rows); out rows are not.
void CheckPrefill(const Shape& s, KvType type, const std::vector<std::pair<int, int>>& chunks,
                  uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ctx, qlen, qstart;
  int tokens = 0, max_q = 0;
  for (const auto& [cached, fresh] : chunks) {
    ctx.push_back(cached + fresh);
    qlen.push_back(fresh);
    qstart.push_back(tokens);
    tokens += fresh;
    max_q = std::max(max_q, fresh);
  }
  const Pool pool(s, type, ctx, rng);
  const int num_seqs = static_cast<int>(chunks.size());
  const int64_t width = static_cast<int64_t>(s.q_heads()) * s.head_dim;
  const int64_t q_stride = width + 64;
  const std::vector<float> q = RandomQueries(static_cast<size_t>(tokens * q_stride), rng);
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  float* dq = Upload(q);
  const size_t out_size = static_cast<size_t>(tokens * width);
  float* dout = Upload(std::vector<float>(out_size, NAN));
  int32_t *dstart = Upload(qstart), *dqlen = Upload(qlen), *dctx = Upload(ctx);
  ASSERT_EQ(
      PrefillAttention(dq, q_stride, pool.kv, pool.device_tables, pool.max_blocks, dstart, dqlen,
                       dctx, num_seqs, max_q, s.q_heads(), s.kv_heads, scale, dout, nullptr),
      cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> out = Download(dout, out_size);
  for (int seq = 0; seq < num_seqs; ++seq) {
    for (int i = 0; i < qlen[seq]; ++i) {
      const int pos = ctx[seq] - qlen[seq] + i;
      for (int qh = 0; qh < s.q_heads(); ++qh) {
        const int64_t token = qstart[seq] + i;
        const std::vector<double> want =
            pool.Reference(&q[token * q_stride + qh * s.head_dim], seq, qh / s.group, pos, scale);
        for (int d = 0; d < s.head_dim; ++d) {
          ASSERT_NEAR(out[token * width + qh * s.head_dim + d], want[d], 2e-5)
              << "seq " << seq << " query " << i << " (position " << pos << ") head " << qh
              << " dim " << d;
        }
      }
    }
  }
  for (void* p : {static_cast<void*>(dq), static_cast<void*>(dout), static_cast<void*>(dstart),
                  static_cast<void*>(dqlen), static_cast<void*>(dctx)}) {
    cudaFree(p);
  }
}

TEST(PagedAttentionTest, PrefillChunksMatchAFloat64Reference) {
  BATON_SKIP_WITHOUT_GPU();
  // (cached prefix, new tokens): a whole prompt, a chunk after a cached prefix, a short
  // chunk after a long one, and one token (a decode step through the prefill kernel).
  const std::vector<std::pair<int, int>> chunks = {{0, 37}, {20, 16}, {300, 5}, {5, 1}};
  CheckPrefill({.kv_heads = 8, .group = 4, .head_dim = 64}, KvType::kF32, chunks, 6);
  CheckPrefill({.kv_heads = 3, .group = 3, .head_dim = 64}, KvType::kBf16, chunks, 7);
  CheckPrefill({.kv_heads = 2, .group = 2, .head_dim = 128}, KvType::kF32, {{64, 70}}, 8);
  // Small heads (stories260K has head_dim 8): one or two dims per lane of a query.
  CheckPrefill({.kv_heads = 4, .group = 2, .head_dim = 8}, KvType::kBf16, chunks, 13);
  CheckPrefill({.kv_heads = 2, .group = 2, .head_dim = 16}, KvType::kF32, chunks, 14);
}

TEST(PagedAttentionTest, DecodeMatchesAFloat64ReferenceInF32Pages) {
  BATON_SKIP_WITHOUT_GPU();
  // 1B-like: 8 KV heads, groups of 4, head_dim 64; contexts inside a page, on a split
  // boundary, just past one and across several.
  CheckDecode({.kv_heads = 8, .group = 4, .head_dim = 64}, KvType::kF32, {1, 17, 256, 257, 700}, 1);
  // SmolLM2-135M-like: 3 KV heads, groups of 3; and head_dim 128 with no grouping.
  CheckDecode({.kv_heads = 3, .group = 3, .head_dim = 64}, KvType::kF32, {40, 513}, 2);
  CheckDecode({.kv_heads = 2, .group = 1, .head_dim = 128}, KvType::kF32, {300, 5}, 3);
  // The limits: head_dim 256 with a group of 16 (the most shared memory), and head_dim 32.
  CheckDecode({.kv_heads = 1, .group = 16, .head_dim = 256}, KvType::kF32, {260, 31}, 9);
  CheckDecode({.kv_heads = 4, .group = 2, .head_dim = 32}, KvType::kF32, {513}, 10);
  // Heads narrower than a warp, or not a multiple of it: idle lanes must add nothing.
  CheckDecode({.kv_heads = 4, .group = 2, .head_dim = 8}, KvType::kF32, {1, 40, 300}, 15);
  CheckDecode({.kv_heads = 2, .group = 2, .head_dim = 16}, KvType::kF32, {17, 257}, 16);
  CheckDecode({.kv_heads = 1, .group = 3, .head_dim = 40}, KvType::kF32, {100}, 17);
  // Padding sequences (no context) among real ones, and one that is last (alone).
  CheckDecode({.kv_heads = 2, .group = 4, .head_dim = 64}, KvType::kF32, {0, 300, 0, 9}, 11);
  CheckDecode({.kv_heads = 2, .group = 2, .head_dim = 64}, KvType::kF32, {40, 0}, 12);
}

TEST(PagedAttentionTest, DecodeMatchesAFloat64ReferenceInBf16Pages) {
  BATON_SKIP_WITHOUT_GPU();
  CheckDecode({.kv_heads = 8, .group = 4, .head_dim = 64}, KvType::kBf16, {3, 256, 1000}, 4);
  CheckDecode({.kv_heads = 4, .group = 8, .head_dim = 128}, KvType::kBf16, {129, 64}, 5);
}

// Host-side checks, before any launch: this one runs without a GPU too.
TEST(PagedAttentionTest, ShapesTheKernelDoesNotTakeAreRefused) {
  PagedKv kv;
  kv.block_size = 16;
  kv.head_dim = 44;  // not a multiple of 8
  int32_t* none = nullptr;
  const auto decode = [&](int max_blocks, int num_q_heads, int num_kv_heads) {
    return DecodeAttention(nullptr, 512, none, kv, none, max_blocks, none, 1, num_q_heads,
                           num_kv_heads, 64, 1.0f, nullptr, nullptr, nullptr);
  };
  EXPECT_EQ(decode(4, 8, 8), cudaErrorInvalidValue);
  kv.head_dim = 264;  // past kMaxHeadDim
  EXPECT_EQ(decode(4, 8, 8), cudaErrorInvalidValue);
  kv.head_dim = 64;
  EXPECT_EQ(decode(4, 34, 2), cudaErrorInvalidValue);  // a group of 17
  EXPECT_EQ(decode(3, 8, 8), cudaErrorInvalidValue);   // 3 blocks of 16 cannot hold 64 positions
  const auto prefill = [&](int num_q_heads, int num_kv_heads) {
    return PrefillAttention(nullptr, 512, kv, none, 4, none, none, none, 1, 16, num_q_heads,
                            num_kv_heads, 1.0f, nullptr, nullptr);
  };
  EXPECT_EQ(prefill(9, 2), cudaErrorInvalidValue);  // 9 query heads over 2 KV heads
  kv.head_dim = 44;
  EXPECT_EQ(prefill(8, 8), cudaErrorInvalidValue);  // head_dim not a multiple of 8
  kv.head_dim = 64;
  kv.block_size = 0;
  EXPECT_EQ(prefill(8, 8), cudaErrorInvalidValue);  // no positions per page
}

}  // namespace
}  // namespace baton::kernels::cuda
