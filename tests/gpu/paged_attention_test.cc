// The GPU's paged KV write and decode attention against a float64 reference on the host,
// over page tables that are not contiguous, in f32 and bf16 pages, with contexts that end
// inside a page, on a split boundary and past several splits. Skipped without a GPU.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
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

// Writes every sequence's K and V with WritePagedKv into shuffled pages, runs
// DecodeAttention, and compares each output with a float64 softmax over the values the
// pages hold (read back, so that bf16 rounding is the reference's too).
void CheckDecode(const Shape& s, KvType type, const std::vector<int>& lens, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  const int num_seqs = static_cast<int>(lens.size());
  const int max_context = *std::max_element(lens.begin(), lens.end());
  const int max_blocks = (max_context + s.block_size - 1) / s.block_size;
  const int num_pages = num_seqs * max_blocks + 3;
  std::vector<int32_t> pages(num_pages);
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), rng);  // tables that are not contiguous
  std::vector<int32_t> tables(static_cast<size_t>(num_seqs) * max_blocks);
  for (size_t i = 0; i < tables.size(); ++i) tables[i] = pages[i];

  // Every token's K and V, and where it goes.
  const int tokens = std::accumulate(lens.begin(), lens.end(), 0);
  std::vector<float> k(static_cast<size_t>(tokens) * s.kv_heads * s.head_dim), v(k.size());
  for (float& x : k) x = uni(rng);
  for (float& x : v) x = uni(rng);
  std::vector<int32_t> slot_pages, slot_rows;
  for (int q = 0; q < num_seqs; ++q) {
    for (int t = 0; t < lens[q]; ++t) {
      slot_pages.push_back(tables[q * max_blocks + t / s.block_size]);
      slot_rows.push_back(t % s.block_size);
    }
  }
  const size_t elem = type == KvType::kF32 ? 4 : 2;
  const int64_t pool_elems = num_pages * s.page_stride();
  void* pool = nullptr;
  ASSERT_EQ(cudaMalloc(&pool, pool_elems * elem), cudaSuccess);
  ASSERT_EQ(cudaMemset(pool, 0xFF, pool_elems * elem), cudaSuccess);  // NaN where unwritten
  PagedKv kv;
  kv.type = type;
  kv.base = static_cast<char*>(pool) + s.layer * s.kv_heads * s.head_stride() * elem;
  kv.page_stride = s.page_stride();
  kv.head_stride = s.head_stride();
  kv.rows = s.rows();
  kv.block_size = s.block_size;
  kv.head_dim = s.head_dim;
  float *dk = Upload(k), *dv = Upload(v);
  int32_t *dsp = Upload(slot_pages), *dsr = Upload(slot_rows);
  ASSERT_EQ(WritePagedKv(kv, s.kv_heads, dk, dv, dsp, dsr, tokens, nullptr), cudaSuccess);

  // The values as the pages hold them.
  std::vector<float> held(pool_elems);
  if (type == KvType::kF32) {
    held = Download(static_cast<const float*>(pool), pool_elems);
  } else {
    const auto raw = Download(static_cast<const __nv_bfloat16*>(pool), pool_elems);
    for (int64_t i = 0; i < pool_elems; ++i) held[i] = __bfloat162float(raw[i]);
  }
  const auto at = [&](int page, int head, int half, int pos, int d) {
    return held[page * s.page_stride() + (s.layer * s.kv_heads + head) * s.head_stride() +
                half * s.rows() + static_cast<int64_t>(pos) * s.head_dim + d];
  };
  // The write put each token's row where the layout says, rounded once.
  for (int t = 0, q = 0, base = 0; t < tokens; ++t) {
    while (t - base >= lens[q]) base += lens[q++];
    for (int h = 0; h < s.kv_heads; ++h) {
      for (int d = 0; d < s.head_dim; ++d) {
        const float want = k[(static_cast<size_t>(t) * s.kv_heads + h) * s.head_dim + d];
        const float got = at(slot_pages[t], h, 0, slot_rows[t], d);
        if (type == KvType::kF32) {
          ASSERT_EQ(got, want);
        } else {
          ASSERT_EQ(got, __bfloat162float(__float2bfloat16_rn(want)));
        }
      }
    }
  }

  std::vector<float> q(static_cast<size_t>(num_seqs) * s.q_heads() * s.head_dim);
  for (float& x : q) x = uni(rng);
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  float* dq = Upload(q);
  int32_t *dtables = Upload(tables),
          *dlens = Upload(std::vector<int32_t>(lens.begin(), lens.end()));
  void* workspace = nullptr;
  ASSERT_EQ(cudaMalloc(&workspace, DecodeAttentionWorkspaceBytes(num_seqs, s.q_heads(), s.head_dim,
                                                                 max_context)),
            cudaSuccess);
  float* dout = nullptr;
  ASSERT_EQ(cudaMalloc(&dout, q.size() * sizeof(float)), cudaSuccess);
  ASSERT_EQ(DecodeAttention(dq, kv, dtables, max_blocks, dlens, num_seqs, s.q_heads(), s.kv_heads,
                            max_context, scale, workspace, dout, nullptr),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> out = Download(dout, q.size());

  for (int seq = 0; seq < num_seqs; ++seq) {
    for (int qh = 0; qh < s.q_heads(); ++qh) {
      const int h = qh / s.group;
      const float* qv = &q[(static_cast<size_t>(seq) * s.q_heads() + qh) * s.head_dim];
      std::vector<double> score(lens[seq]);
      double m = -INFINITY;
      for (int t = 0; t < lens[seq]; ++t) {
        const int page = tables[seq * max_blocks + t / s.block_size];
        double dot = 0;
        for (int d = 0; d < s.head_dim; ++d) {
          dot += static_cast<double>(qv[d]) * at(page, h, 0, t % s.block_size, d);
        }
        score[t] = dot * scale;
        m = std::max(m, score[t]);
      }
      double sum = 0;
      for (double& x : score) sum += (x = std::exp(x - m));
      for (int d = 0; d < s.head_dim; ++d) {
        double want = 0;
        for (int t = 0; t < lens[seq]; ++t) {
          want +=
              score[t] * at(tables[seq * max_blocks + t / s.block_size], h, 1, t % s.block_size, d);
        }
        want /= sum;
        const float got = out[(static_cast<size_t>(seq) * s.q_heads() + qh) * s.head_dim + d];
        ASSERT_NEAR(got, want, 2e-5)
            << "seq " << seq << " (len " << lens[seq] << ") head " << qh << " dim " << d;
      }
    }
  }

  // Batch invariance: the last sequence alone gives the same bits as in the batch.
  const int last = num_seqs - 1;
  ASSERT_EQ(DecodeAttention(dq + static_cast<size_t>(last) * s.q_heads() * s.head_dim, kv,
                            dtables + last * max_blocks, max_blocks, dlens + last, 1, s.q_heads(),
                            s.kv_heads, max_context, scale, workspace, dout, nullptr),
            cudaSuccess);
  const std::vector<float> alone = Download(dout, static_cast<size_t>(s.q_heads()) * s.head_dim);
  for (size_t i = 0; i < alone.size(); ++i) {
    ASSERT_EQ(alone[i], out[static_cast<size_t>(last) * s.q_heads() * s.head_dim + i]) << i;
  }
  for (void* p : {static_cast<void*>(dk), static_cast<void*>(dv), static_cast<void*>(dsp),
                  static_cast<void*>(dsr), static_cast<void*>(dq), static_cast<void*>(dtables),
                  static_cast<void*>(dlens), workspace, static_cast<void*>(dout), pool}) {
    cudaFree(p);
  }
}

TEST(PagedAttentionTest, DecodeMatchesAFloat64ReferenceInF32Pages) {
  BATON_SKIP_WITHOUT_GPU();
  // 1B-like: 8 KV heads, groups of 4, head_dim 64; contexts inside a page, on a split
  // boundary, just past one and across several.
  CheckDecode({.kv_heads = 8, .group = 4, .head_dim = 64}, KvType::kF32, {1, 17, 256, 257, 700}, 1);
  // SmolLM2-135M-like: 3 KV heads, groups of 3; and head_dim 128 with no grouping.
  CheckDecode({.kv_heads = 3, .group = 3, .head_dim = 64}, KvType::kF32, {40, 513}, 2);
  CheckDecode({.kv_heads = 2, .group = 1, .head_dim = 128}, KvType::kF32, {300, 5}, 3);
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
  kv.head_dim = 48;  // not a multiple of 32
  int32_t* none = nullptr;
  EXPECT_EQ(
      DecodeAttention(nullptr, kv, none, 4, none, 1, 8, 8, 64, 1.0f, nullptr, nullptr, nullptr),
      cudaErrorInvalidValue);
  kv.head_dim = 64;
  EXPECT_EQ(
      DecodeAttention(nullptr, kv, none, 4, none, 1, 34, 2, 64, 1.0f, nullptr, nullptr, nullptr),
      cudaErrorInvalidValue);  // a group of 17
  EXPECT_EQ(
      DecodeAttention(nullptr, kv, none, 3, none, 1, 8, 8, 64, 1.0f, nullptr, nullptr, nullptr),
      cudaErrorInvalidValue);  // 3 blocks of 16 cannot hold 64 positions
}

}  // namespace
}  // namespace baton::kernels::cuda
