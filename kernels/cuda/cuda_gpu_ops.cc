#include "kernels/cuda/cuda_gpu_ops.h"

#include <cuda_bf16.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"
#include "common/status.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/paged_attention.cuh"
#include "kernels/cuda/sampling.cuh"
#include "kernels/cuda/step_ops.cuh"

namespace baton::kernels::cuda {
namespace {

// A captured graph, instantiated; destroying it while a replay runs is safe (CUDA frees it
// when the replay ends).
class CudaGraph : public GpuGraph {
 public:
  explicit CudaGraph(cudaGraphExec_t exec) : exec_(exec) {}
  ~CudaGraph() override { cudaGraphExecDestroy(exec_); }
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;
  cudaGraphExec_t exec() const { return exec_; }

 private:
  cudaGraphExec_t exec_;
};

struct GraphDeleter {
  void operator()(cudaGraph_t graph) const { cudaGraphDestroy(graph); }
};
using OwnedGraph = std::unique_ptr<CUgraph_st, GraphDeleter>;

// cudaGetLastError reports the last failed runtime call of the thread, not only the last
// launch: a failure already turned into a status is cleared here, so that the next kernel
// call's launch check does not report it again (a refused Malloc, then a good launch).
// Sticky errors (a kernel's fault) stay.
cudaError_t Reported(cudaError_t e) {
  if (e != cudaSuccess) (void)cudaGetLastError();
  return e;
}

const __nv_bfloat16* AsBf16(const Bf16Bits* p) { return reinterpret_cast<const __nv_bfloat16*>(p); }
__nv_bfloat16* AsBf16(Bf16Bits* p) { return reinterpret_cast<__nv_bfloat16*>(p); }

PagedKv ToPaged(const GpuKvLayer& kv) {
  PagedKv p;
  p.base = kv.base;
  p.type = kv.bf16 ? KvType::kBf16 : KvType::kF32;
  p.page_stride = kv.page_stride;
  p.head_stride = kv.head_stride;
  p.rows = kv.rows;
  p.block_size = kv.block_size;
  p.head_dim = kv.head_dim;
  return p;
}

absl::Status NotWhileCapturing(const char* call) {
  return absl::FailedPreconditionError(absl::StrCat(
      call,
      " while capturing a graph (only kernels, CopyToDevice, CopyOnDevice and Memset are "
      "captured); the capture has ended"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<CudaGpuOps>> CudaGpuOps::Create(int device_id,
                                                               bool batch_invariant) {
  int count = 0;
  const cudaError_t counted = Reported(cudaGetDeviceCount(&count));
  if (counted != cudaSuccess || count == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "CudaGpuOps: no CUDA device is visible: ",
        counted == cudaSuccess ? "the driver reports 0 devices" : cudaGetErrorName(counted)));
  }
  if (device_id < 0 || device_id >= count) {
    return absl::InvalidArgumentError(
        absl::StrCat("CudaGpuOps: device ", device_id, " of ", count, " visible"));
  }
  BATON_CUDA_RETURN_IF_ERROR(Reported(cudaSetDevice(device_id)));
  cudaDeviceProp prop = {};
  BATON_CUDA_RETURN_IF_ERROR(Reported(cudaGetDeviceProperties(&prop, device_id)));
  std::unique_ptr<CudaGpuOps> ops(new CudaGpuOps());
  ops->device_id_ = device_id;
  ops->name_ = absl::StrCat("cuda:", device_id, " ", prop.name);
  // Non-blocking: no implicit ordering with the legacy default stream, which a capture in
  // progress elsewhere would otherwise trip over.
  BATON_CUDA_RETURN_IF_ERROR(
      Reported(cudaStreamCreateWithFlags(&ops->stream_, cudaStreamNonBlocking)));
  BATON_ASSIGN_OR_RETURN(ops->gemm_, Gemm::Create(batch_invariant));
  return ops;
}

CudaGpuOps::~CudaGpuOps() {
  if (capturing_) AbortCapture();
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  gemm_.reset();
  FreeDeferred();
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

void CudaGpuOps::AbortCapture() {
  cudaGraph_t graph = nullptr;
  // An invalidated capture (a launch that failed inside it) ends here too, without a graph.
  cudaStreamEndCapture(stream_, &graph);
  if (graph != nullptr) cudaGraphDestroy(graph);
  (void)cudaGetLastError();  // the failure was reported by the call that ended the capture
  capturing_ = false;
  FreeDeferred();
}

void CudaGpuOps::FreeDeferred() {
  for (void* p : deferred_device_frees_) cudaFree(p);
  for (void* p : deferred_host_frees_) cudaFreeHost(p);
  deferred_device_frees_.clear();
  deferred_host_frees_.clear();
}

absl::Status CudaGpuOps::OnDevice() const {
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current == device_id_) return absl::OkStatus();
  BATON_CUDA_RETURN_IF_ERROR(Reported(cudaSetDevice(device_id_)));
  return absl::OkStatus();
}

absl::Status CudaGpuOps::Checked(absl::Status status) {
  if (!status.ok() && capturing_) AbortCapture();
  return status;
}

// --- memory ---

absl::StatusOr<int64_t> CudaGpuOps::FreeMemoryBytes() {
  BATON_RETURN_IF_ERROR(OnDevice());
  if (capturing_) return Checked(NotWhileCapturing("FreeMemoryBytes"));
  size_t free_bytes = 0, total_bytes = 0;
  BATON_CUDA_RETURN_IF_ERROR(Reported(cudaMemGetInfo(&free_bytes, &total_bytes)));
  return static_cast<int64_t>(free_bytes);
}

absl::StatusOr<void*> CudaGpuOps::Malloc(int64_t bytes) {
  BATON_RETURN_IF_ERROR(OnDevice());
  if (capturing_) return Checked(NotWhileCapturing("Malloc"));
  if (bytes <= 0) return absl::InvalidArgumentError(absl::StrCat("Malloc of ", bytes, " bytes"));
  void* p = nullptr;
  const cudaError_t e = Reported(cudaMalloc(&p, static_cast<size_t>(bytes)));
  if (e == cudaErrorMemoryAllocation) {
    size_t free_bytes = 0, total_bytes = 0;
    Reported(cudaMemGetInfo(&free_bytes, &total_bytes));
    return absl::ResourceExhaustedError(absl::StrCat(name_, ": cannot allocate ", bytes,
                                                     " bytes of device memory (", free_bytes,
                                                     " of ", total_bytes, " bytes free)"));
  }
  if (e != cudaSuccess) return CudaStatus(e, absl::StrCat("cudaMalloc of ", bytes, " bytes"));
  return p;  // cudaMalloc aligns to at least 256 bytes
}

void CudaGpuOps::Free(void* device) {
  if (device == nullptr) return;
  (void)OnDevice();
  if (capturing_) {
    deferred_device_frees_.push_back(device);  // cudaFree would synchronize
    return;
  }
  Reported(cudaFree(device));
}

absl::StatusOr<void*> CudaGpuOps::MallocHost(int64_t bytes) {
  BATON_RETURN_IF_ERROR(OnDevice());
  if (capturing_) return Checked(NotWhileCapturing("MallocHost"));
  if (bytes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("MallocHost of ", bytes, " bytes"));
  }
  void* p = nullptr;
  const cudaError_t e = Reported(cudaMallocHost(&p, static_cast<size_t>(bytes)));
  if (e == cudaErrorMemoryAllocation) {
    return absl::ResourceExhaustedError(
        absl::StrCat(name_, ": cannot allocate ", bytes, " bytes of pinned host memory"));
  }
  if (e != cudaSuccess) return CudaStatus(e, absl::StrCat("cudaMallocHost of ", bytes, " bytes"));
  return p;
}

void CudaGpuOps::FreeHost(void* host) {
  if (host == nullptr) return;
  if (capturing_) {
    deferred_host_frees_.push_back(host);
    return;
  }
  Reported(cudaFreeHost(host));
}

absl::Status CudaGpuOps::CopyToDevice(void* device, const void* host, int64_t bytes) {
  return Checked([&]() -> absl::Status {
    BATON_RETURN_IF_ERROR(OnDevice());
    if (bytes < 0) return absl::InvalidArgumentError("CopyToDevice of a negative size");
    if (bytes == 0) return absl::OkStatus();
    BATON_CUDA_RETURN_IF_ERROR(Reported(cudaMemcpyAsync(device, host, static_cast<size_t>(bytes),
                                                        cudaMemcpyHostToDevice, stream_)));
    return absl::OkStatus();
  }());
}

absl::Status CudaGpuOps::CopyOnDevice(void* dst, const void* src, int64_t bytes) {
  return Checked([&]() -> absl::Status {
    BATON_RETURN_IF_ERROR(OnDevice());
    if (bytes < 0) return absl::InvalidArgumentError("CopyOnDevice of a negative size");
    if (bytes == 0) return absl::OkStatus();
    BATON_CUDA_RETURN_IF_ERROR(Reported(
        cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, stream_)));
    return absl::OkStatus();
  }());
}

absl::Status CudaGpuOps::CopyToHost(void* host, const void* device, int64_t bytes) {
  BATON_RETURN_IF_ERROR(OnDevice());
  if (capturing_) return Checked(NotWhileCapturing("CopyToHost"));
  if (bytes < 0) return absl::InvalidArgumentError("CopyToHost of a negative size");
  if (bytes > 0) {
    BATON_CUDA_RETURN_IF_ERROR(Reported(cudaMemcpyAsync(host, device, static_cast<size_t>(bytes),
                                                        cudaMemcpyDeviceToHost, stream_)));
  }
  // Also where a fault of an earlier kernel on the stream surfaces.
  BATON_CUDA_RETURN_IF_ERROR(Reported(cudaStreamSynchronize(stream_)));
  return absl::OkStatus();
}

absl::Status CudaGpuOps::Memset(void* device, int value, int64_t bytes) {
  return Checked([&]() -> absl::Status {
    BATON_RETURN_IF_ERROR(OnDevice());
    if (bytes < 0) return absl::InvalidArgumentError("Memset of a negative size");
    if (bytes == 0) return absl::OkStatus();
    BATON_CUDA_RETURN_IF_ERROR(
        Reported(cudaMemsetAsync(device, value, static_cast<size_t>(bytes), stream_)));
    return absl::OkStatus();
  }());
}

absl::Status CudaGpuOps::Synchronize() {
  BATON_RETURN_IF_ERROR(OnDevice());
  if (capturing_) return Checked(NotWhileCapturing("Synchronize"));
  BATON_CUDA_RETURN_IF_ERROR(Reported(cudaStreamSynchronize(stream_)));
  return absl::OkStatus();
}

// --- kernels: each launcher returns its launch's cudaGetLastError ---

absl::Status CudaGpuOps::Embed(const Bf16Bits* table, int64_t rows, int64_t first_row, int dim,
                               const int32_t* ids, int tokens, float* out) {
  return Checked([&]() -> absl::Status {
    BATON_RETURN_IF_ERROR(OnDevice());
    BATON_CUDA_RETURN_IF_ERROR(
        EmbedBf16(AsBf16(table), rows, first_row, dim, ids, tokens, out, stream_));
    return absl::OkStatus();
  }());
}

absl::Status CudaGpuOps::RmsNorm(const float* x, const float* weight, int rows, int n, float eps,
                                 Bf16Bits* out) {
  return Checked([&]() -> absl::Status {
    BATON_RETURN_IF_ERROR(OnDevice());
    BATON_CUDA_RETURN_IF_ERROR(RmsNormBf16(x, weight, rows, n, eps, AsBf16(out), stream_));
    return absl::OkStatus();
  }());
}

absl::Status CudaGpuOps::AddRmsNorm(float* residual, const float* x, const float* weight, int rows,
                                    int n, float eps, Bf16Bits* out) {
  return Checked([&]() -> absl::Status {
    BATON_RETURN_IF_ERROR(OnDevice());
    BATON_CUDA_RETURN_IF_ERROR(
        AddRmsNormBf16(residual, x, weight, rows, n, eps, AsBf16(out), stream_));
    return absl::OkStatus();
  }());
}

absl::Status CudaGpuOps::GatherRows(const float* x, int n, const int32_t* rows, int count,
                                    float* out) {
  return Checked([&]() -> absl::Status {
    BATON_RETURN_IF_ERROR(OnDevice());
    BATON_CUDA_RETURN_IF_ERROR(cuda::GatherRows(x, n, rows, count, out, stream_));
    return absl::OkStatus();
  }());
}

absl::Status CudaGpuOps::Add(float* residual, const float* x, int64_t n) {
  return Checked([&]() -> absl::Status {
    BATON_RETURN_IF_ERROR(OnDevice());
    BATON_CUDA_RETURN_IF_ERROR(AddInPlace(residual, x, n, stream_));
    return absl::OkStatus();
  }());
}

absl::Status CudaGpuOps::Linear(const Bf16Bits* x, const Bf16Bits* w, const float* bias, int m,
                                int n, int k, float* out) {
  return Checked([&]() -> absl::Status {
    BATON_RETURN_IF_ERROR(OnDevice());
    BATON_RETURN_IF_ERROR(
        gemm_->Linear(AsBf16(x), AsBf16(w), m, n, k, GemmOut::kF32, out, stream_));
    // A separate pass rather than cuBLASLt's bias epilogue: every plan stays the one
    // gemm.cc chose and tested, and the add is one f32 rounding, as the emulation's.
    if (bias != nullptr) BATON_CUDA_RETURN_IF_ERROR(AddBias(out, bias, m, n, stream_));
    return absl::OkStatus();
  }());
}

absl::Status CudaGpuOps::RopeQk(float* qkv, int tokens, int64_t row_stride, int q_heads,
                                int kv_heads, int head_dim, const int32_t* positions,
                                const float* cos_table, const float* sin_table, bool interleaved) {
  return Checked([&]() -> absl::Status {
    BATON_RETURN_IF_ERROR(OnDevice());
    BATON_CUDA_RETURN_IF_ERROR(cuda::RopeQk(qkv, tokens, row_stride, q_heads, kv_heads, head_dim,
                                            positions, cos_table, sin_table, interleaved, stream_));
    return absl::OkStatus();
  }());
}

absl::Status CudaGpuOps::WriteKv(const GpuKvLayer& kv, int kv_heads, const float* k, const float* v,
                                 int64_t row_stride, const int32_t* slot_pages,
                                 const int32_t* slot_rows, int tokens) {
  return Checked([&]() -> absl::Status {
    BATON_RETURN_IF_ERROR(OnDevice());
    BATON_CUDA_RETURN_IF_ERROR(WritePagedKv(ToPaged(kv), kv_heads, k, v, row_stride, slot_pages,
                                            slot_rows, tokens, stream_));
    return absl::OkStatus();
  }());
}

int64_t CudaGpuOps::DecodeWorkspaceBytes(int num_seqs, int q_heads, int head_dim,
                                         int max_context) const {
  return DecodeAttentionWorkspaceBytes(num_seqs, q_heads, head_dim, max_context);
}

absl::Status CudaGpuOps::DecodeAttention(const float* q, int64_t q_stride, const int32_t* q_rows,
                                         const GpuKvLayer& kv, const int32_t* block_tables,
                                         int max_blocks, const int32_t* context_lens, int num_seqs,
                                         int q_heads, int kv_heads, int max_context, float scale,
                                         void* workspace, float* out) {
  return Checked([&]() -> absl::Status {
    BATON_RETURN_IF_ERROR(OnDevice());
    BATON_CUDA_RETURN_IF_ERROR(cuda::DecodeAttention(
        q, q_stride, q_rows, ToPaged(kv), block_tables, max_blocks, context_lens, num_seqs, q_heads,
        kv_heads, max_context, scale, workspace, out, stream_));
    return absl::OkStatus();
  }());
}

absl::Status CudaGpuOps::PrefillAttention(const float* q, int64_t q_stride, const GpuKvLayer& kv,
                                          const int32_t* block_tables, int max_blocks,
                                          const int32_t* query_starts, const int32_t* query_lens,
                                          const int32_t* context_lens, int num_seqs,
                                          int max_query_len, int q_heads, int kv_heads, float scale,
                                          float* out) {
  return Checked([&]() -> absl::Status {
    BATON_RETURN_IF_ERROR(OnDevice());
    BATON_CUDA_RETURN_IF_ERROR(cuda::PrefillAttention(
        q, q_stride, ToPaged(kv), block_tables, max_blocks, query_starts, query_lens, context_lens,
        num_seqs, max_query_len, q_heads, kv_heads, scale, out, stream_));
    return absl::OkStatus();
  }());
}

absl::Status CudaGpuOps::SwiGlu(const float* gate_up, int rows, int inter, Bf16Bits* out) {
  return Checked([&]() -> absl::Status {
    BATON_RETURN_IF_ERROR(OnDevice());
    BATON_CUDA_RETURN_IF_ERROR(SwiGluBf16(gate_up, rows, inter, AsBf16(out), stream_));
    return absl::OkStatus();
  }());
}

absl::Status CudaGpuOps::ToBf16(const float* x, int64_t n, Bf16Bits* out) {
  return Checked([&]() -> absl::Status {
    BATON_RETURN_IF_ERROR(OnDevice());
    BATON_CUDA_RETURN_IF_ERROR(cuda::ToBf16(x, n, AsBf16(out), stream_));
    return absl::OkStatus();
  }());
}

absl::Status CudaGpuOps::ArgMax(const float* logits, int64_t vocab, int rows, int32_t* ids) {
  return Checked([&]() -> absl::Status {
    BATON_RETURN_IF_ERROR(OnDevice());
    BATON_CUDA_RETURN_IF_ERROR(GreedyTokens(logits, vocab, rows, ids, stream_));
    return absl::OkStatus();
  }());
}

// --- graphs ---

absl::Status CudaGpuOps::BeginCapture() {
  BATON_RETURN_IF_ERROR(OnDevice());
  if (capturing_) return Checked(absl::FailedPreconditionError("BeginCapture while capturing"));
  // ThreadLocal: this thread may not make calls that are unsafe during a capture (they
  // fail, and end it), other threads' calls are not affected.
  BATON_CUDA_RETURN_IF_ERROR(
      Reported(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal)));
  capturing_ = true;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<GpuGraph>> CudaGpuOps::EndCapture() {
  if (!capturing_) {
    return absl::FailedPreconditionError(
        "EndCapture without a capture in progress (a call that failed while capturing ends "
        "the capture)");
  }
  capturing_ = false;
  cudaGraph_t raw = nullptr;
  const cudaError_t ended = Reported(cudaStreamEndCapture(stream_, &raw));
  const OwnedGraph graph(raw);
  FreeDeferred();
  if (ended != cudaSuccess) return CudaStatus(ended, "cudaStreamEndCapture");
  cudaGraphExec_t exec = nullptr;
  BATON_CUDA_RETURN_IF_ERROR(Reported(cudaGraphInstantiate(&exec, graph.get(), 0)));
  return std::unique_ptr<GpuGraph>(std::make_unique<CudaGraph>(exec));
}

absl::Status CudaGpuOps::Launch(const GpuGraph& graph) {
  BATON_RETURN_IF_ERROR(OnDevice());
  if (capturing_) return Checked(NotWhileCapturing("Launch"));
  const auto* cuda_graph = dynamic_cast<const CudaGraph*>(&graph);
  if (cuda_graph == nullptr) {
    return absl::InvalidArgumentError("Launch: the graph was not captured by a CudaGpuOps");
  }
  BATON_CUDA_RETURN_IF_ERROR(Reported(cudaGraphLaunch(cuda_graph->exec(), stream_)));
  return absl::OkStatus();
}

}  // namespace baton::kernels::cuda
