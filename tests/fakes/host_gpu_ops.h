// A host emulation of kernels::GpuOps: the same contracts, computed on the CPU over host
// memory standing for device memory, so that the GPU forward's planning (buffers,
// offsets, metadata, graph capture and replay) runs in CI where there is no GPU.
//
// It is a test double, written for clarity: sums in double, one element at a time. It
// keeps what a test needs to see the GPU's faults: fresh "device" memory is filled with
// 0xff bytes (NaN as f32 and as bf16), since device memory is not zeroed; a kernel
// argument outside every live allocation is an error naming the call; capture records
// each call with its arguments and Launch replays them, reading memory then, as a CUDA
// graph does.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/gpu_ops.h"

namespace baton::fakes {

class HostGpuOps : public kernels::GpuOps {
 public:
  HostGpuOps() = default;
  ~HostGpuOps() override;

  const char* name() const override { return "host emulation"; }

  // The emulated device's size: FreeMemoryBytes is this less what is allocated.
  void set_memory_bytes(int64_t bytes) { memory_bytes_ = bytes; }
  absl::StatusOr<int64_t> FreeMemoryBytes() override { return memory_bytes_ - in_use_; }
  absl::StatusOr<void*> Malloc(int64_t bytes) override;
  void Free(void* device) override;
  absl::StatusOr<void*> MallocHost(int64_t bytes) override;
  void FreeHost(void* host) override;
  absl::Status CopyToDevice(void* device, const void* host, int64_t bytes) override;
  absl::Status CopyOnDevice(void* dst, const void* src, int64_t bytes) override;
  absl::Status CopyToHost(void* host, const void* device, int64_t bytes) override;
  absl::Status Memset(void* device, int value, int64_t bytes) override;
  absl::Status Synchronize() override;

  absl::Status Embed(const kernels::Bf16Bits* table, int64_t rows, int64_t first_row, int dim,
                     const int32_t* ids, int tokens, float* out) override;
  absl::Status RmsNorm(const float* x, const float* weight, int rows, int n, float eps,
                       kernels::Bf16Bits* out) override;
  absl::Status AddRmsNorm(float* residual, const float* x, const float* weight, int rows, int n,
                          float eps, kernels::Bf16Bits* out) override;
  absl::Status GatherRows(const float* x, int n, const int32_t* rows, int count,
                          float* out) override;
  absl::Status Add(float* residual, const float* x, int64_t n) override;
  absl::Status Linear(const kernels::Bf16Bits* x, const kernels::Bf16Bits* w, const float* bias,
                      int m, int n, int k, float* out) override;
  absl::Status RopeQk(float* qkv, int tokens, int64_t row_stride, int q_heads, int kv_heads,
                      int head_dim, const int32_t* positions, const float* cos_table,
                      const float* sin_table, bool interleaved) override;
  absl::Status WriteKv(const kernels::GpuKvLayer& kv, int kv_heads, const float* k, const float* v,
                       int64_t row_stride, const int32_t* slot_pages, const int32_t* slot_rows,
                       int tokens) override;
  int64_t DecodeWorkspaceBytes(int num_seqs, int q_heads, int head_dim,
                               int max_context) const override;
  absl::Status DecodeAttention(const float* q, int64_t q_stride, const int32_t* q_rows,
                               const kernels::GpuKvLayer& kv, const int32_t* block_tables,
                               int max_blocks, const int32_t* context_lens, int num_seqs,
                               int q_heads, int kv_heads, int max_context, float scale,
                               void* workspace, float* out) override;
  absl::Status PrefillAttention(const float* q, int64_t q_stride, const kernels::GpuKvLayer& kv,
                                const int32_t* block_tables, int max_blocks,
                                const int32_t* query_starts, const int32_t* query_lens,
                                const int32_t* context_lens, int num_seqs, int max_query_len,
                                int q_heads, int kv_heads, float scale, float* out) override;
  absl::Status SwiGlu(const float* gate_up, int rows, int inter, kernels::Bf16Bits* out) override;
  absl::Status ToBf16(const float* x, int64_t n, kernels::Bf16Bits* out) override;
  absl::Status ArgMax(const float* logits, int64_t vocab, int rows, int32_t* ids) override;

  absl::Status BeginCapture() override;
  absl::StatusOr<std::unique_ptr<kernels::GpuGraph>> EndCapture() override;
  absl::Status Launch(const kernels::GpuGraph& graph) override;

  // For tests.
  int64_t device_bytes_in_use() const { return in_use_; }
  int64_t calls() const { return calls_; }        // kernel calls run (replays included)
  int64_t launches() const { return launches_; }  // graph replays

 private:
  using Op = std::function<absl::Status()>;
  // Runs `op` now, or records it while capturing.
  absl::Status Enqueue(Op op);
  // OK when [p, p + bytes) lies in one live device allocation; else an error naming `what`.
  absl::Status CheckDevice(const void* p, int64_t bytes, const char* what) const;
  absl::Status CheckAttention(const char* what, const kernels::GpuKvLayer& kv,
                              const int32_t* block_tables, int max_blocks, int num_seqs,
                              int kv_heads) const;

  std::map<uintptr_t, int64_t> device_;  // live device allocations: start -> bytes
  int64_t in_use_ = 0;
  int64_t memory_bytes_ = int64_t{1} << 30;
  int64_t calls_ = 0;
  int64_t launches_ = 0;
  bool capturing_ = false;
  std::vector<Op> captured_;
};

}  // namespace baton::fakes
