// The error model for cuBLAS and cuBLASLt calls, as common/cuda_status.h is for the CUDA
// runtime. Header-only; included only by sources built where CUDA is found.
//
//   BATON_CUBLAS_RETURN_IF_ERROR(cublasLtMatmul(...));
#pragma once

#include <cublas_api.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace baton {

inline absl::Status CublasStatus(cublasStatus_t s, absl::string_view what) {
  if (s == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  const std::string message =
      absl::StrCat("cuBLAS: ", what, ": ", cublasGetStatusName(s), ": ", cublasGetStatusString(s));
  switch (s) {
    case CUBLAS_STATUS_ALLOC_FAILED:
      return absl::ResourceExhaustedError(message);
    case CUBLAS_STATUS_NOT_SUPPORTED:
    case CUBLAS_STATUS_ARCH_MISMATCH:
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return absl::FailedPreconditionError(message);
    case CUBLAS_STATUS_INVALID_VALUE:
      return absl::InvalidArgumentError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace baton

#define BATON_CUBLAS_RETURN_IF_ERROR(expr)                       \
  do {                                                           \
    const cublasStatus_t baton_cublas_status_ = (expr);          \
    if (baton_cublas_status_ != CUBLAS_STATUS_SUCCESS) {         \
      return ::baton::CublasStatus(baton_cublas_status_, #expr); \
    }                                                            \
  } while (false)
