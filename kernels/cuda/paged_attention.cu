#include <cuda_bf16.h>

#include <cmath>

#include "kernels/cuda/paged_attention.cuh"

namespace baton::kernels::cuda {
namespace {

constexpr int kThreads = 128;  // 4 warps
constexpr int kWarps = kThreads / 32;

__device__ inline float Load(const float* p) { return *p; }
__device__ inline float Load(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ inline void Store(float* p, float v) { *p = v; }
__device__ inline void Store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

__device__ inline float WarpSum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}
__device__ inline float WarpMax(float v) {
  for (int offset = 16; offset > 0; offset /= 2) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  return v;
}

template <typename T>
__global__ void WriteKvKernel(T* base, int64_t page_stride, int64_t head_stride, int64_t rows,
                              int head_dim, int num_kv_heads, const float* k, const float* v,
                              int64_t row_stride, const int32_t* slot_pages,
                              const int32_t* slot_rows) {
  const int64_t t = blockIdx.x;
  const int64_t page = slot_pages[t], row = slot_rows[t];
  if (page < 0 || row < 0) return;  // a padding slot
  // The token's kv heads are contiguous from its row's start.
  const float* kt = k + t * row_stride;
  const float* vt = v + t * row_stride;
  for (int i = threadIdx.x; i < num_kv_heads * head_dim; i += blockDim.x) {
    const int h = i / head_dim, d = i % head_dim;
    T* dst = base + page * page_stride + h * head_stride + row * head_dim + d;
    Store(dst, kt[i]);
    Store(dst + rows, vt[i]);
  }
}

// Per (sequence, split, query head): the split's max score, its sum of exp(score - max)
// and its unnormalized output, head_dim floats.
struct Partials {
  float* out;  // [num_seqs][num_q_heads][max_splits][head_dim]
  float* max;  // [num_seqs][num_q_heads][max_splits]
  float* sum;
};

// A sequence's context as the decode kernels read it: cut at max_context (a longer one
// would need splits that were not launched, and pages past its block table), and a
// negative one read as 0.
__device__ inline int DecodeLength(const int32_t* context_lens, int seq, int max_context) {
  return max(0, min(context_lens[seq], max_context));
}

template <typename T>
__global__ void DecodeSplitKernel(const float* q, int64_t q_stride, const int32_t* q_rows,
                                  const T* base, int64_t page_stride, int64_t head_stride,
                                  int64_t rows, int block_size, int head_dim,
                                  const int32_t* block_tables, int max_blocks,
                                  const int32_t* context_lens, int num_q_heads, int group,
                                  int max_context, int max_splits, float scale, Partials partials) {
  const int kv_head = blockIdx.x, seq = blockIdx.y, split = blockIdx.z;
  const int len = DecodeLength(context_lens, seq, max_context);
  const int start = split * kDecodeSplit;
  if (start >= len) return;  // past the context (all of a padding sequence's splits)
  const int count = min(kDecodeSplit, len - start);
  extern __shared__ float shared[];
  float* qs = shared;                         // [group][head_dim], scaled
  float* scores = shared + group * head_dim;  // [group][kDecodeSplit]
  __shared__ float split_max[kMaxGroup], split_sum[kMaxGroup];

  const int q_head0 = kv_head * group;
  const float* q_seq =
      q + static_cast<int64_t>(q_rows[seq]) * q_stride + static_cast<int64_t>(q_head0) * head_dim;
  for (int i = threadIdx.x; i < group * head_dim; i += kThreads) qs[i] = q_seq[i] * scale;
  __syncthreads();

  const int32_t* table = block_tables + static_cast<int64_t>(seq) * max_blocks;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // Scores: a warp per position; lane l holds dims l, l + 32, ... of its K row (a head_dim
  // below 32, or not a multiple of it, leaves the last lanes idle), read once for every
  // query of the group.
  for (int j = warp; j < count; j += kWarps) {
    const int pos = start + j;
    const T* key = base + static_cast<int64_t>(table[pos / block_size]) * page_stride +
                   kv_head * head_stride + static_cast<int64_t>(pos % block_size) * head_dim;
    float kd[kMaxHeadDim / 32];
#pragma unroll
    for (int c = 0; c < kMaxHeadDim / 32; ++c) {
      kd[c] = c * 32 + lane < head_dim ? Load(key + c * 32 + lane) : 0;
    }
    for (int g = 0; g < group; ++g) {
      float partial = 0;
#pragma unroll
      for (int c = 0; c < kMaxHeadDim / 32; ++c) {
        if (c * 32 + lane < head_dim) partial += qs[g * head_dim + c * 32 + lane] * kd[c];
      }
      partial = WarpSum(partial);
      if (lane == 0) scores[g * kDecodeSplit + j] = partial;
    }
  }
  __syncthreads();

  // Softmax statistics of the split, a warp per query.
  for (int g = warp; g < group; g += kWarps) {
    float* s = scores + g * kDecodeSplit;
    float m = -INFINITY;
    for (int j = lane; j < count; j += 32) m = fmaxf(m, s[j]);
    m = WarpMax(m);
    float l = 0;
    for (int j = lane; j < count; j += 32) {
      const float e = expf(s[j] - m);
      s[j] = e;
      l += e;
    }
    l = WarpSum(l);
    if (lane == 0) {
      split_max[g] = m;
      split_sum[g] = l;
    }
  }
  __syncthreads();

  // The split's weighted sum of V rows, a thread per (query, dim), positions in order.
  const int64_t part = (static_cast<int64_t>(seq) * num_q_heads + q_head0) * max_splits + split;
  for (int i = threadIdx.x; i < group * head_dim; i += kThreads) {
    const int g = i / head_dim, d = i % head_dim;
    const float* w = scores + g * kDecodeSplit;
    float acc = 0;
    for (int j = 0; j < count; ++j) {
      const int pos = start + j;
      const T* value = base + static_cast<int64_t>(table[pos / block_size]) * page_stride +
                       kv_head * head_stride + rows +
                       static_cast<int64_t>(pos % block_size) * head_dim;
      acc += w[j] * Load(value + d);
    }
    partials.out[(part + static_cast<int64_t>(g) * max_splits) * head_dim + d] = acc;
  }
  if (threadIdx.x < group) {
    partials.max[part + static_cast<int64_t>(threadIdx.x) * max_splits] = split_max[threadIdx.x];
    partials.sum[part + static_cast<int64_t>(threadIdx.x) * max_splits] = split_sum[threadIdx.x];
  }
}

// Merges a sequence's splits for one query head, in split order, into out row q_rows[seq];
// a thread per dim. A sequence without context has no splits and gets zeros (not 0 / 0).
__global__ void MergeSplitsKernel(const int32_t* q_rows, const int32_t* context_lens,
                                  int num_q_heads, int head_dim, int max_context, int max_splits,
                                  Partials partials, float* out) {
  const int q_head = blockIdx.x, seq = blockIdx.y;
  const int splits =
      (DecodeLength(context_lens, seq, max_context) + kDecodeSplit - 1) / kDecodeSplit;
  float* dst = out + (static_cast<int64_t>(q_rows[seq]) * num_q_heads + q_head) * head_dim;
  if (splits == 0) {
    for (int d = threadIdx.x; d < head_dim; d += blockDim.x) dst[d] = 0.0f;
    return;
  }
  const int64_t part = (static_cast<int64_t>(seq) * num_q_heads + q_head) * max_splits;
  float m = -INFINITY;
  for (int c = 0; c < splits; ++c) m = fmaxf(m, partials.max[part + c]);
  float l = 0;
  for (int c = 0; c < splits; ++c) l += partials.sum[part + c] * expf(partials.max[part + c] - m);
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float acc = 0;
    for (int c = 0; c < splits; ++c) {
      acc += partials.out[(part + c) * head_dim + d] * expf(partials.max[part + c] - m);
    }
    dst[d] = acc / l;
  }
}

// 8 threads per query, each holding head_dim / 8 of its dims (interleaved: d = lane8 +
// 8 * j), so that a dot product is 8 partial sums and three xor shuffles.
constexpr int kLanesPerQuery = kThreads / kPrefillQueries;
static_assert(kLanesPerQuery == 8);
constexpr int kMaxDimsPerLane = kMaxHeadDim / kLanesPerQuery;

template <typename T>
__global__ void PrefillKernel(const float* q, int64_t q_stride, const T* base, int64_t page_stride,
                              int64_t head_stride, int64_t rows, int block_size, int head_dim,
                              const int32_t* block_tables, int max_blocks,
                              const int32_t* query_starts, const int32_t* query_lens,
                              const int32_t* context_lens, int num_q_heads, int group, float scale,
                              float* out) {
  const int tile = blockIdx.x, q_head = blockIdx.y, seq = blockIdx.z;
  const int qlen = query_lens[seq];
  if (tile * kPrefillQueries >= qlen) return;
  const int ctx = context_lens[seq];
  const int first_pos = ctx - qlen;  // position of the sequence's first new token
  const int kv_head = q_head / group;
  const int qi = threadIdx.x / kLanesPerQuery, lane8 = threadIdx.x % kLanesPerQuery;
  const int local = tile * kPrefillQueries + qi;  // this thread's query within the chunk
  const bool active = local < qlen;
  const int pos = first_pos + (active ? local : qlen - 1);
  const int dims = head_dim / kLanesPerQuery;

  float qd[kMaxDimsPerLane], acc[kMaxDimsPerLane];
  const float* qrow = q +
                      static_cast<int64_t>(query_starts[seq] + (active ? local : 0)) * q_stride +
                      static_cast<int64_t>(q_head) * head_dim;
#pragma unroll
  for (int j = 0; j < kMaxDimsPerLane; ++j) {
    qd[j] = j < dims ? qrow[lane8 + kLanesPerQuery * j] * scale : 0.0f;
    acc[j] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;

  extern __shared__ float tile_rows[];  // [kPrefillKeys][head_dim]: K, then V
  const int32_t* table = block_tables + static_cast<int64_t>(seq) * max_blocks;
  const int last_pos = first_pos + min(qlen, (tile + 1) * kPrefillQueries) - 1;
  for (int k0 = 0; k0 <= last_pos; k0 += kPrefillKeys) {
    const int count = min(kPrefillKeys, last_pos + 1 - k0);
    const auto load = [&](int half) {
      __syncthreads();  // the previous rows are no longer read
      for (int i = threadIdx.x; i < count * head_dim; i += kThreads) {
        const int j = i / head_dim, d = i % head_dim, p = k0 + j;
        tile_rows[i] = Load(base + static_cast<int64_t>(table[p / block_size]) * page_stride +
                            kv_head * head_stride + half * rows +
                            static_cast<int64_t>(p % block_size) * head_dim + d);
      }
      __syncthreads();
    };
    load(0);
    float s[kPrefillKeys];
    float tile_max = -INFINITY;
#pragma unroll
    for (int j = 0; j < kPrefillKeys; ++j) {
      float partial = 0.0f;
      if (j < count) {
#pragma unroll
        for (int d = 0; d < kMaxDimsPerLane; ++d) {
          if (d < dims) partial += qd[d] * tile_rows[j * head_dim + lane8 + kLanesPerQuery * d];
        }
      }
      // The 8 lanes of a query are consecutive in the warp: xor 4, 2, 1 stays among them.
      partial += __shfl_xor_sync(0xffffffffu, partial, 4);
      partial += __shfl_xor_sync(0xffffffffu, partial, 2);
      partial += __shfl_xor_sync(0xffffffffu, partial, 1);
      s[j] = j < count && k0 + j <= pos ? partial : -INFINITY;  // causal
      tile_max = fmaxf(tile_max, s[j]);
    }
    const float m_new = fmaxf(m, tile_max);
    const float rescale = m == -INFINITY ? 0.0f : expf(m - m_new);
    l *= rescale;
#pragma unroll
    for (int d = 0; d < kMaxDimsPerLane; ++d) acc[d] *= rescale;
#pragma unroll
    for (int j = 0; j < kPrefillKeys; ++j) {
      s[j] = s[j] == -INFINITY ? 0.0f : expf(s[j] - m_new);
      l += s[j];
    }
    m = m_new;
    load(1);
#pragma unroll
    for (int j = 0; j < kPrefillKeys; ++j) {
      if (j >= count) break;
#pragma unroll
      for (int d = 0; d < kMaxDimsPerLane; ++d) {
        if (d < dims) acc[d] += s[j] * tile_rows[j * head_dim + lane8 + kLanesPerQuery * d];
      }
    }
  }
  if (!active) return;
  float* orow =
      out + (static_cast<int64_t>(query_starts[seq] + local) * num_q_heads + q_head) * head_dim;
  const float inv = 1.0f / l;
#pragma unroll
  for (int d = 0; d < kMaxDimsPerLane; ++d) {
    if (d < dims) orow[lane8 + kLanesPerQuery * d] = acc[d] * inv;
  }
}

int MaxSplits(int max_context) { return (max_context + kDecodeSplit - 1) / kDecodeSplit; }

}  // namespace

cudaError_t WritePagedKv(const PagedKv& kv, int num_kv_heads, const float* k, const float* v,
                         int64_t row_stride, const int32_t* slot_pages, const int32_t* slot_rows,
                         int tokens, cudaStream_t stream) {
  if (tokens <= 0) return cudaSuccess;
  if (kv.head_dim <= 0 || num_kv_heads <= 0) return cudaErrorInvalidValue;
  if (kv.type == KvType::kF32) {
    WriteKvKernel<<<tokens, kThreads, 0, stream>>>(
        static_cast<float*>(kv.base), kv.page_stride, kv.head_stride, kv.rows, kv.head_dim,
        num_kv_heads, k, v, row_stride, slot_pages, slot_rows);
  } else {
    WriteKvKernel<<<tokens, kThreads, 0, stream>>>(
        static_cast<__nv_bfloat16*>(kv.base), kv.page_stride, kv.head_stride, kv.rows, kv.head_dim,
        num_kv_heads, k, v, row_stride, slot_pages, slot_rows);
  }
  return cudaGetLastError();
}

int64_t DecodeAttentionWorkspaceBytes(int num_seqs, int num_q_heads, int head_dim,
                                      int max_context) {
  const int64_t parts = static_cast<int64_t>(num_seqs) * num_q_heads * MaxSplits(max_context);
  return parts * (head_dim + 2) * static_cast<int64_t>(sizeof(float));
}

cudaError_t DecodeAttention(const float* q, int64_t q_stride, const int32_t* q_rows,
                            const PagedKv& kv, const int32_t* block_tables, int max_blocks,
                            const int32_t* context_lens, int num_seqs, int num_q_heads,
                            int num_kv_heads, int max_context, float scale, void* workspace,
                            float* out, cudaStream_t stream) {
  if (num_seqs <= 0) return cudaSuccess;
  if (kv.head_dim <= 0 || kv.head_dim % 8 != 0 || kv.head_dim > kMaxHeadDim || num_kv_heads <= 0 ||
      num_q_heads % num_kv_heads != 0 || num_q_heads / num_kv_heads > kMaxGroup ||
      max_context <= 0 || num_seqs > 65535 ||  // grid y
      static_cast<int64_t>(max_blocks) * kv.block_size < max_context) {
    return cudaErrorInvalidValue;
  }
  const int group = num_q_heads / num_kv_heads;
  const int max_splits = MaxSplits(max_context);
  const int64_t parts = static_cast<int64_t>(num_seqs) * num_q_heads * max_splits;
  Partials p;
  p.out = static_cast<float*>(workspace);
  p.max = p.out + parts * kv.head_dim;
  p.sum = p.max + parts;
  const dim3 grid(num_kv_heads, num_seqs, max_splits);
  const size_t shared = static_cast<size_t>(group) * (kv.head_dim + kDecodeSplit) * sizeof(float);
  if (kv.type == KvType::kF32) {
    DecodeSplitKernel<<<grid, kThreads, shared, stream>>>(
        q, q_stride, q_rows, static_cast<const float*>(kv.base), kv.page_stride, kv.head_stride,
        kv.rows, kv.block_size, kv.head_dim, block_tables, max_blocks, context_lens, num_q_heads,
        group, max_context, max_splits, scale, p);
  } else {
    DecodeSplitKernel<<<grid, kThreads, shared, stream>>>(
        q, q_stride, q_rows, static_cast<const __nv_bfloat16*>(kv.base), kv.page_stride,
        kv.head_stride, kv.rows, kv.block_size, kv.head_dim, block_tables, max_blocks, context_lens,
        num_q_heads, group, max_context, max_splits, scale, p);
  }
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  MergeSplitsKernel<<<dim3(num_q_heads, num_seqs), kv.head_dim, 0, stream>>>(
      q_rows, context_lens, num_q_heads, kv.head_dim, max_context, max_splits, p, out);
  return cudaGetLastError();
}

cudaError_t PrefillAttention(const float* q, int64_t q_stride, const PagedKv& kv,
                             const int32_t* block_tables, int max_blocks,
                             const int32_t* query_starts, const int32_t* query_lens,
                             const int32_t* context_lens, int num_seqs, int max_query_len,
                             int num_q_heads, int num_kv_heads, float scale, float* out,
                             cudaStream_t stream) {
  if (num_seqs <= 0 || max_query_len <= 0) return cudaSuccess;
  if (kv.head_dim <= 0 || kv.head_dim % 8 != 0 || kv.head_dim > kMaxHeadDim || num_kv_heads <= 0 ||
      num_q_heads % num_kv_heads != 0 || max_blocks <= 0 || kv.block_size <= 0 ||
      num_seqs > 65535 || num_q_heads > 65535) {  // grid y and z
    return cudaErrorInvalidValue;
  }
  const int group = num_q_heads / num_kv_heads;
  const dim3 grid((max_query_len + kPrefillQueries - 1) / kPrefillQueries, num_q_heads, num_seqs);
  const size_t shared = static_cast<size_t>(kPrefillKeys) * kv.head_dim * sizeof(float);
  if (kv.type == KvType::kF32) {
    PrefillKernel<<<grid, kThreads, shared, stream>>>(
        q, q_stride, static_cast<const float*>(kv.base), kv.page_stride, kv.head_stride, kv.rows,
        kv.block_size, kv.head_dim, block_tables, max_blocks, query_starts, query_lens,
        context_lens, num_q_heads, group, scale, out);
  } else {
    PrefillKernel<<<grid, kThreads, shared, stream>>>(
        q, q_stride, static_cast<const __nv_bfloat16*>(kv.base), kv.page_stride, kv.head_stride,
        kv.rows, kv.block_size, kv.head_dim, block_tables, max_blocks, query_starts, query_lens,
        context_lens, num_q_heads, group, scale, out);
  }
  return cudaGetLastError();
}

}  // namespace baton::kernels::cuda
