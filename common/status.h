// Status helpers shared by every layer. Recoverable errors are absl::Status or
// absl::StatusOr; broken invariants use BATON_CHECK (common/check.h).
//
//   absl::StatusOr<Vocab> Load(std::string_view path) {
//     BATON_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
//     BATON_RETURN_IF_ERROR(Validate(file));
//     ...
//   }
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define BATON_STATUS_CONCAT_INNER_(a, b) a##b
#define BATON_STATUS_CONCAT_(a, b) BATON_STATUS_CONCAT_INNER_(a, b)

#define BATON_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::absl::Status baton_status_ = (expr);         \
    if (!baton_status_.ok()) return baton_status_; \
  } while (false)

#define BATON_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return std::move(tmp).status();     \
  lhs = std::move(tmp).value()

#define BATON_ASSIGN_OR_RETURN(lhs, expr) \
  BATON_ASSIGN_OR_RETURN_IMPL_(BATON_STATUS_CONCAT_(baton_statusor_, __LINE__), lhs, expr)
