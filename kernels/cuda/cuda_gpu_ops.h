// kernels::GpuOps on one CUDA device: every call is enqueued on one non-blocking stream,
// the kernels are ours (ops.cuh, step_ops.cuh, paged_attention.cuh) and the matrix
// multiplies cuBLASLt's (gemm.h). tests/gpu/gpu_ops_contract_test.cc checks each call
// against the host emulation (tests/fakes/host_gpu_ops.h).
//
//   BATON_ASSIGN_OR_RETURN(auto ops, kernels::cuda::CudaGpuOps::Create(0, batch_invariant));
//   BATON_ASSIGN_OR_RETURN(void* x, ops->Malloc(bytes));
//   BATON_RETURN_IF_ERROR(ops->RmsNorm(...));
//
// One thread at a time drives it (the engine creates it on one thread and steps on
// another): every call first makes device_id the calling thread's current device. Graph
// capture is in cudaStreamCaptureModeThreadLocal, so BeginCapture, the captured calls and
// EndCapture come from one thread.
//
// No kernel call allocates or synchronizes, so any sequence of them can be captured. While
// capturing, the calls that cannot be (FreeMemoryBytes, Malloc, MallocHost, CopyToHost,
// Synchronize, Launch) are refused with FailedPrecondition; Free and FreeHost wait until the
// capture ends. A call that fails while capturing ends the capture and drops what it recorded, so
// the stream is never left capturing; EndCapture then answers FailedPrecondition.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/gpu_ops.h"

namespace baton::kernels::cuda {

class Gemm;

class CudaGpuOps : public GpuOps {
 public:
  // Makes device_id current, creates the stream and the linear layers' Gemm (with its
  // batch-invariant mode, gemm.h). FailedPrecondition where no device is visible.
  static absl::StatusOr<std::unique_ptr<CudaGpuOps>> Create(int device_id, bool batch_invariant);
  ~CudaGpuOps() override;
  CudaGpuOps(const CudaGpuOps&) = delete;
  CudaGpuOps& operator=(const CudaGpuOps&) = delete;

  const char* name() const override { return name_.c_str(); }

  absl::StatusOr<int64_t> FreeMemoryBytes() override;
  absl::StatusOr<void*> Malloc(int64_t bytes) override;
  void Free(void* device) override;
  absl::StatusOr<void*> MallocHost(int64_t bytes) override;
  void FreeHost(void* host) override;
  absl::Status CopyToDevice(void* device, const void* host, int64_t bytes) override;
  absl::Status CopyOnDevice(void* dst, const void* src, int64_t bytes) override;
  absl::Status CopyToHost(void* host, const void* device, int64_t bytes) override;
  absl::Status Memset(void* device, int value, int64_t bytes) override;
  absl::Status Synchronize() override;

  absl::Status Embed(const Bf16Bits* table, int64_t rows, int64_t first_row, int dim,
                     const int32_t* ids, int tokens, float* out) override;
  absl::Status RmsNorm(const float* x, const float* weight, int rows, int n, float eps,
                       Bf16Bits* out) override;
  absl::Status AddRmsNorm(float* residual, const float* x, const float* weight, int rows, int n,
                          float eps, Bf16Bits* out) override;
  absl::Status GatherRows(const float* x, int n, const int32_t* rows, int count,
                          float* out) override;
  absl::Status Add(float* residual, const float* x, int64_t n) override;
  absl::Status Linear(const Bf16Bits* x, const Bf16Bits* w, const float* bias, int m, int n, int k,
                      float* out) override;
  absl::Status RopeQk(float* qkv, int tokens, int64_t row_stride, int q_heads, int kv_heads,
                      int head_dim, const int32_t* positions, const float* cos_table,
                      const float* sin_table, bool interleaved) override;
  absl::Status WriteKv(const GpuKvLayer& kv, int kv_heads, const float* k, const float* v,
                       int64_t row_stride, const int32_t* slot_pages, const int32_t* slot_rows,
                       int tokens) override;
  int64_t DecodeWorkspaceBytes(int num_seqs, int q_heads, int head_dim,
                               int max_context) const override;
  absl::Status DecodeAttention(const float* q, int64_t q_stride, const int32_t* q_rows,
                               const GpuKvLayer& kv, const int32_t* block_tables, int max_blocks,
                               const int32_t* context_lens, int num_seqs, int q_heads, int kv_heads,
                               int max_context, float scale, void* workspace, float* out) override;
  absl::Status PrefillAttention(const float* q, int64_t q_stride, const GpuKvLayer& kv,
                                const int32_t* block_tables, int max_blocks,
                                const int32_t* query_starts, const int32_t* query_lens,
                                const int32_t* context_lens, int num_seqs, int max_query_len,
                                int q_heads, int kv_heads, float scale, float* out) override;
  absl::Status SwiGlu(const float* gate_up, int rows, int inter, Bf16Bits* out) override;
  absl::Status ToBf16(const float* x, int64_t n, Bf16Bits* out) override;
  absl::Status ArgMax(const float* logits, int64_t vocab, int rows, int32_t* ids) override;

  absl::Status BeginCapture() override;
  absl::StatusOr<std::unique_ptr<GpuGraph>> EndCapture() override;
  absl::Status Launch(const GpuGraph& graph) override;

  // For tests and for code that adds its own work to the same stream.
  cudaStream_t stream() const { return stream_; }
  int device_id() const { return device_id_; }

 private:
  CudaGpuOps() = default;
  // Makes device_id the calling thread's current device.
  absl::Status OnDevice() const;
  // `status` unchanged; when it is an error while capturing, the capture ends first.
  absl::Status Checked(absl::Status status);
  // Ends the capture in progress and drops its graph; then frees what waited for it.
  void AbortCapture();
  void FreeDeferred();

  int device_id_ = 0;
  std::string name_;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<Gemm> gemm_;
  bool capturing_ = false;
  // Frees asked for while capturing (cudaFree and cudaFreeHost synchronize): done after.
  std::vector<void*> deferred_device_frees_;
  std::vector<void*> deferred_host_frees_;
};

}  // namespace baton::kernels::cuda
