// The seam between the GPU forward (model/arch/llama_gpu.h) and the device: the memory
// calls and the kernels one step launches, in order, on one stream. The CUDA
// implementation (kernels/cuda/cuda_gpu_ops.h) launches our kernels and cuBLASLt; a host
// emulation of the same contracts (tests/fakes/host_gpu_ops.h) lets CI run the GPU
// forward's planning, buffers and graph replay where there is no GPU.
//
// Every pointer a kernel call takes is device memory; host memory is named as such.
// Calls are enqueued, not finished, when they return (CopyToHost and Synchronize wait).
// Activations are f32; a matrix multiply reads bf16 rows (the norms and SwiGLU write
// them), accumulates in f32 and writes f32. bf16 values are raw bits (uint16_t) in these
// signatures so that no CUDA header is needed to call them.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace baton::kernels {

using Bf16Bits = uint16_t;

// One layer's KV pages on the device, as kvcache/page_layout.h lays them out: element
// (page, kv head, half, pos, d) sits at page * page_stride + head * head_stride + half *
// rows + pos * head_dim + d elements from `base` (half 0 is K, 1 is V).
struct GpuKvLayer {
  void* base = nullptr;
  bool bf16 = true;  // else f32
  int64_t page_stride = 0;
  int64_t head_stride = 0;
  int64_t rows = 0;  // block_size * head_dim
  int block_size = 0;
  int head_dim = 0;
};

// A captured sequence of calls (a CUDA graph), replayed with the same arguments: the
// pointers and shapes are fixed at capture, the memory they point at is read at replay.
class GpuGraph {
 public:
  virtual ~GpuGraph() = default;
};

class GpuOps {
 public:
  virtual ~GpuOps() = default;

  // For logs: "cuda:0 NVIDIA H200", "host emulation".
  virtual const char* name() const = 0;

  // --- memory ---
  // Device memory free now (cudaMemGetInfo): what a KV cache may be sized from.
  virtual absl::StatusOr<int64_t> FreeMemoryBytes() = 0;
  // Device memory, 256-byte aligned; ResourceExhausted naming the bytes when none is left.
  virtual absl::StatusOr<void*> Malloc(int64_t bytes) = 0;
  virtual void Free(void* device) = 0;
  // Host memory the device copies from and to without staging (pinned).
  virtual absl::StatusOr<void*> MallocHost(int64_t bytes) = 0;
  virtual void FreeHost(void* host) = 0;
  // Enqueued copies; the host buffer of CopyToDevice may be reused once the stream has
  // passed the copy (after the next Synchronize or CopyToHost).
  virtual absl::Status CopyToDevice(void* device, const void* host, int64_t bytes) = 0;
  virtual absl::Status CopyOnDevice(void* dst, const void* src, int64_t bytes) = 0;
  // Waits for everything enqueued before it, then copies: the result is in `host` on return.
  virtual absl::Status CopyToHost(void* host, const void* device, int64_t bytes) = 0;
  virtual absl::Status Memset(void* device, int value, int64_t bytes) = 0;
  virtual absl::Status Synchronize() = 0;

  // --- the kernels of a Llama step ---
  // out[t] = table[ids[t] - first_row] as f32 (dim wide) when that row is among the
  // table's `rows`, else zeros (a vocabulary-parallel rank holds rows [first_row,
  // first_row + rows)).
  virtual absl::Status Embed(const Bf16Bits* table, int64_t rows, int64_t first_row, int dim,
                             const int32_t* ids, int tokens, float* out) = 0;

  // out[r] = bf16(x[r] / sqrt(mean(x[r]^2) + eps) * weight), rows of n.
  virtual absl::Status RmsNorm(const float* x, const float* weight, int rows, int n, float eps,
                               Bf16Bits* out) = 0;
  // residual[r] += x[r]; out[r] = RmsNorm(residual[r]).
  virtual absl::Status AddRmsNorm(float* residual, const float* x, const float* weight, int rows,
                                  int n, float eps, Bf16Bits* out) = 0;
  // out[i] = x[rows[i]] for `count` rows of n floats (the rows that get logits).
  virtual absl::Status GatherRows(const float* x, int n, const int32_t* rows, int count,
                                  float* out) = 0;
  // residual[i] += x[i].
  virtual absl::Status Add(float* residual, const float* x, int64_t n) = 0;

  // out[m][n] = x[m][k] . w[n][k]^T (+ bias[n] when not null), f32 accumulation and output.
  virtual absl::Status Linear(const Bf16Bits* x, const Bf16Bits* w, const float* bias, int m, int n,
                              int k, float* out) = 0;

  // RoPE in place on each token row of `qkv` (row_stride floats apart): its q_heads query
  // heads at the row's start and the kv_heads key heads after them. The angles of position
  // p are cos_table / sin_table [p][head_dim / 2]. `interleaved` pairs x[2i] with x[2i+1]
  // (GGUF llama); otherwise x[i] with x[i + head_dim/2] (HF).
  virtual absl::Status RopeQk(float* qkv, int tokens, int64_t row_stride, int q_heads, int kv_heads,
                              int head_dim, const int32_t* positions, const float* cos_table,
                              const float* sin_table, bool interleaved) = 0;

  // Writes token t's K and V (kv_heads x head_dim f32 at k + t * row_stride and
  // v + t * row_stride) at row slot_rows[t] of page slot_pages[t], converted to the pages'
  // type. A negative page or row is padding and writes nothing.
  virtual absl::Status WriteKv(const GpuKvLayer& kv, int kv_heads, const float* k, const float* v,
                               int64_t row_stride, const int32_t* slot_pages,
                               const int32_t* slot_rows, int tokens) = 0;

  // Decode: sequence s has one query token, q row q_rows[s] (q_stride floats apart; the
  // query heads first in the row), and attends over positions [0, context_lens[s]) of its
  // pages, block_tables[s * max_blocks ...]. out row q_rows[s] (q_heads * head_dim floats
  // apart) gets the result. A context of 0 writes zeros (a padding sequence). Contexts
  // must be at most max_context, which decides the work split and the workspace.
  virtual int64_t DecodeWorkspaceBytes(int num_seqs, int q_heads, int head_dim,
                                       int max_context) const = 0;
  virtual absl::Status DecodeAttention(const float* q, int64_t q_stride, const int32_t* q_rows,
                                       const GpuKvLayer& kv, const int32_t* block_tables,
                                       int max_blocks, const int32_t* context_lens, int num_seqs,
                                       int q_heads, int kv_heads, int max_context, float scale,
                                       void* workspace, float* out) = 0;
  // Prefill: sequence s brings query_lens[s] tokens, q rows query_starts[s].., at
  // positions context_lens[s] - query_lens[s] onward, causal over its pages (whose first
  // context_lens[s] positions hold a cached prefix, then the chunk). out rows as q's.
  virtual absl::Status PrefillAttention(const float* q, int64_t q_stride, const GpuKvLayer& kv,
                                        const int32_t* block_tables, int max_blocks,
                                        const int32_t* query_starts, const int32_t* query_lens,
                                        const int32_t* context_lens, int num_seqs,
                                        int max_query_len, int q_heads, int kv_heads, float scale,
                                        float* out) = 0;

  // out[r][i] = bf16(silu(gate_up[r][i]) * gate_up[r][inter + i]) for `rows` rows.
  virtual absl::Status SwiGlu(const float* gate_up, int rows, int inter, Bf16Bits* out) = 0;
  // out[i] = bf16(x[i]).
  virtual absl::Status ToBf16(const float* x, int64_t n, Bf16Bits* out) = 0;
  // ids[r] = the first index of row r's maximum among `rows` rows of `vocab` logits: ties
  // go to the lowest id and NaN never wins (an all-NaN row gives vocab), as the CPU
  // sampler's greedy choice (engine/sampler.h).
  virtual absl::Status ArgMax(const float* logits, int64_t vocab, int rows, int32_t* ids) = 0;

  // --- graphs ---
  // Between BeginCapture and EndCapture, calls are recorded instead of run (no memory
  // calls but CopyToDevice/CopyOnDevice/Memset); Launch replays them.
  virtual absl::Status BeginCapture() = 0;
  virtual absl::StatusOr<std::unique_ptr<GpuGraph>> EndCapture() = 0;
  virtual absl::Status Launch(const GpuGraph& graph) = 0;
};

// RAII for GpuOps memory.
class GpuBuffer {
 public:
  GpuBuffer() = default;
  static absl::StatusOr<GpuBuffer> Allocate(GpuOps* ops, int64_t bytes) {
    GpuBuffer b;
    auto p = ops->Malloc(bytes);
    if (!p.ok()) return p.status();
    b.ops_ = ops;
    b.data_ = *p;
    b.bytes_ = bytes;
    return b;
  }
  GpuBuffer(GpuBuffer&& o) noexcept { *this = std::move(o); }
  GpuBuffer& operator=(GpuBuffer&& o) noexcept {
    if (this != &o) {
      Reset();
      ops_ = o.ops_;
      data_ = o.data_;
      bytes_ = o.bytes_;
      o.ops_ = nullptr;
      o.data_ = nullptr;
      o.bytes_ = 0;
    }
    return *this;
  }
  GpuBuffer(const GpuBuffer&) = delete;
  GpuBuffer& operator=(const GpuBuffer&) = delete;
  ~GpuBuffer() { Reset(); }

  void* get() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  int64_t bytes() const { return bytes_; }

 private:
  void Reset() {
    if (ops_ != nullptr && data_ != nullptr) ops_->Free(data_);
    data_ = nullptr;
  }
  GpuOps* ops_ = nullptr;
  void* data_ = nullptr;
  int64_t bytes_ = 0;
};

}  // namespace baton::kernels
