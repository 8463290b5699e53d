// The error model for CUDA runtime calls: a cudaError_t becomes an absl::Status that
// names the call, CUDA's name for the error and its text. Header-only, and included only
// by sources built where CUDA is found, so that the CPU build never sees cuda_runtime.h.
//
//   BATON_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, bytes));
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace baton {

inline absl::Status CudaStatus(cudaError_t e, absl::string_view what) {
  if (e == cudaSuccess) return absl::OkStatus();
  const std::string message =
      absl::StrCat("CUDA: ", what, ": ", cudaGetErrorName(e), ": ", cudaGetErrorString(e));
  switch (e) {
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(message);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorNotSupported:
      return absl::FailedPreconditionError(message);
    case cudaErrorInvalidDevice:
    case cudaErrorInvalidValue:
      return absl::InvalidArgumentError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace baton

#define BATON_CUDA_RETURN_IF_ERROR(expr)                                                        \
  do {                                                                                          \
    const cudaError_t baton_cuda_error_ = (expr);                                               \
    if (baton_cuda_error_ != cudaSuccess) return ::baton::CudaStatus(baton_cuda_error_, #expr); \
  } while (false)
