// The GPU's linear layers on cuBLASLt: y[m][n] = x[m][k] . w[n][k]^T with bf16 inputs and
// f32 accumulation, as the CPU's matmul computes x . W^T (kernels/cpu/matmul.h). The
// algorithm and its workspace are chosen once per shape and kept.
//
// Batch invariance (--batch-invariant): the algorithm is chosen once per (n, k, output
// type), not per m, and never splits k, so every output element is one dot product in
// one order whatever the number of rows; a row then gets the same bits in any batch.
// Otherwise cuBLASLt's heuristic picks per m, split-K included.
#pragma once

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace baton::kernels::cuda {

enum class GemmOut { kF32, kBf16 };

class Gemm {
 public:
  // On the current device; `workspace_bytes` of device memory for cuBLASLt's algorithms.
  static absl::StatusOr<std::unique_ptr<Gemm>> Create(bool batch_invariant,
                                                      int64_t workspace_bytes = 32 << 20);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // out = x . w^T: x is [m][k], w is [n][k] (a linear layer's weight as stored), out is
  // [m][n] of `out_type`; all row-major, on the device, 16-byte aligned. InvalidArgument
  // for shapes under 1 or unaligned operands. One workspace serves every call: calls on
  // different streams must not overlap.
  absl::Status Linear(const __nv_bfloat16* x, const __nv_bfloat16* w, int m, int n, int k,
                      GemmOut out_type, void* out, cudaStream_t stream);

  // Shapes whose algorithm is cached (for tests and logs).
  size_t cached_shapes() const { return plans_.size(); }

 private:
  Gemm() = default;
  struct Plan;
  absl::StatusOr<const Plan*> PlanFor(int m, int n, int k, GemmOut out_type);

  bool batch_invariant_ = false;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  int64_t workspace_bytes_ = 0;
  // Keyed by (m, n, k, out type); m is 0 in batch-invariant mode.
  absl::flat_hash_map<std::tuple<int, int, int, int>, std::unique_ptr<Plan>> plans_;
};

}  // namespace baton::kernels::cuda
