#include "kernels/cuda/gemm.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/cublas_status.h"
#include "common/cuda_status.h"
#include "common/status.h"

namespace baton::kernels::cuda {
namespace {

// The m a batch-invariant plan is chosen for; it then serves every m of its (n, k).
constexpr int kInvariantPlanRows = 128;
// The operand alignment every plan is chosen for, in bytes.
constexpr int kAlignment = 16;

cudaDataType_t CudaType(GemmOut t) { return t == GemmOut::kF32 ? CUDA_R_32F : CUDA_R_16BF; }

// The three layouts of one call, column-major as cuBLASLt sees row-major data: y^T[n][m] =
// (w as k x n, transposed) . (x as k x m).
struct Layouts {
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  ~Layouts() {
    if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
    if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
    if (c != nullptr) cublasLtMatrixLayoutDestroy(c);
  }
  absl::Status Init(int m, int n, int k, GemmOut out_type) {
    BATON_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&a, CUDA_R_16BF, k, n, k));
    BATON_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&b, CUDA_R_16BF, k, m, k));
    BATON_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&c, CudaType(out_type), n, m, n));
    return absl::OkStatus();
  }
};

}  // namespace

struct Gemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatmulAlgo_t algo = {};
  ~Plan() {
    if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
  }
};

absl::StatusOr<std::unique_ptr<Gemm>> Gemm::Create(bool batch_invariant, int64_t workspace_bytes) {
  std::unique_ptr<Gemm> g(new Gemm());
  g->batch_invariant_ = batch_invariant;
  g->workspace_bytes_ = workspace_bytes;
  BATON_CUBLAS_RETURN_IF_ERROR(cublasLtCreate(&g->handle_));
  BATON_CUDA_RETURN_IF_ERROR(cudaMalloc(&g->workspace_, workspace_bytes));
  return g;
}

Gemm::~Gemm() {
  plans_.clear();
  if (workspace_ != nullptr) cudaFree(workspace_);
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

absl::StatusOr<const Gemm::Plan*> Gemm::PlanFor(int m, int n, int k, GemmOut out_type) {
  const auto key = std::make_tuple(batch_invariant_ ? 0 : m, n, k, static_cast<int>(out_type));
  if (auto it = plans_.find(key); it != plans_.end()) return it->second.get();
  auto plan = std::make_unique<Plan>();
  BATON_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t transpose = CUBLAS_OP_T, none = CUBLAS_OP_N;
  BATON_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
      plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof(transpose)));
  BATON_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &none, sizeof(none)));
  Layouts layouts;
  BATON_RETURN_IF_ERROR(layouts.Init(batch_invariant_ ? kInvariantPlanRows : m, n, k, out_type));
  cublasLtMatmulPreference_t preference = nullptr;
  BATON_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&preference));
  const uint64_t workspace = static_cast<uint64_t>(workspace_bytes_);
  cublasStatus_t s = cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace));
  // The default asks for 256-byte-aligned operands; a row of a batch (x + r * k) is only
  // 16-byte aligned (Linear checks that much).
  const uint32_t alignment = kAlignment;
  for (const auto attribute :
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
    if (s == CUBLAS_STATUS_SUCCESS) {
      s = cublasLtMatmulPreferenceSetAttribute(preference, attribute, &alignment,
                                               sizeof(alignment));
    }
  }
  constexpr int kWanted = 16;
  cublasLtMatmulHeuristicResult_t results[kWanted] = {};
  int returned = 0;
  if (s == CUBLAS_STATUS_SUCCESS) {
    s = cublasLtMatmulAlgoGetHeuristic(handle_, plan->desc, layouts.a, layouts.b, layouts.c,
                                       layouts.c, preference, kWanted, results, &returned);
  }
  cublasLtMatmulPreferenceDestroy(preference);
  BATON_CUBLAS_RETURN_IF_ERROR(s);
  int chosen = -1;
  for (int i = 0; i < returned && chosen < 0; ++i) {
    if (!batch_invariant_) {
      chosen = i;
      break;
    }
    // Batch-invariant: the first that keeps each dot product whole (no split-K).
    int32_t splits = 1;
    size_t written = 0;
    if (cublasLtMatmulAlgoConfigGetAttribute(&results[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM,
                                             &splits, sizeof(splits),
                                             &written) == CUBLAS_STATUS_SUCCESS &&
        splits <= 1) {
      chosen = i;
    }
  }
  if (chosen < 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cuBLASLt has no ", batch_invariant_ ? "batch-invariant (no split-K) " : "",
        "algorithm for a bf16 GEMM of n=", n, " k=", k, " (", returned, " candidates)"));
  }
  plan->algo = results[chosen].algo;
  const Plan* out = plan.get();
  plans_.emplace(key, std::move(plan));
  return out;
}

absl::Status Gemm::Linear(const __nv_bfloat16* x, const __nv_bfloat16* w, int m, int n, int k,
                          GemmOut out_type, void* out, cudaStream_t stream) {
  if (m < 1 || n < 1 || k < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("GEMM shape m=", m, " n=", n, " k=", k, ": each must be at least 1"));
  }
  for (const void* p :
       {static_cast<const void*>(x), static_cast<const void*>(w), static_cast<const void*>(out)}) {
    if (reinterpret_cast<uintptr_t>(p) % kAlignment != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("GEMM operands must be ", kAlignment, "-byte aligned"));
    }
  }
  BATON_ASSIGN_OR_RETURN(const Plan* plan, PlanFor(m, n, k, out_type));
  Layouts layouts;
  BATON_RETURN_IF_ERROR(layouts.Init(m, n, k, out_type));
  if (batch_invariant_) {
    // The plan was chosen for another m: make sure it serves this one.
    cublasLtMatmulHeuristicResult_t check = {};
    BATON_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulAlgoCheck(
        handle_, plan->desc, layouts.a, layouts.b, layouts.c, layouts.c, &plan->algo, &check));
    if (check.workspaceSize > static_cast<size_t>(workspace_bytes_)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the batch-invariant GEMM plan for n=", n, " k=", k, " needs ", check.workspaceSize,
          " bytes of workspace at m=", m, "; it has ", workspace_bytes_));
    }
  }
  const float one = 1.0f, zero = 0.0f;
  BATON_CUBLAS_RETURN_IF_ERROR(cublasLtMatmul(
      handle_, plan->desc, &one, w, layouts.a, x, layouts.b, &zero, out, layouts.c, out, layouts.c,
      &plan->algo, workspace_, static_cast<size_t>(workspace_bytes_), stream));
  return absl::OkStatus();
}

}  // namespace baton::kernels::cuda
