// Status helpers missing from Debian's Abseil 20220623: early-return macros and annotation.
//
//   SHARDKIT_RETURN_IF_ERROR(DoThing());
//   SHARDKIT_ASSIGN_OR_RETURN(Tensor t, Tensor::Empty({4}, DType::kFloat32));
//   return Annotate(status, "while sharding encoder.weight");
#ifndef SHARDKIT_CORE_BASE_STATUS_MACROS_H_
#define SHARDKIT_CORE_BASE_STATUS_MACROS_H_

#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace shardkit {

// Returns `status` with `context` prefixed to its message ("context: message"), keeping the code
// and the payloads (a failed collective's culprit, core/comm/culprit.h). OK stays OK.
[[nodiscard]] absl::Status Annotate(const absl::Status& status, std::string_view context);

// `status` with `message` instead of its own, keeping the code and the payloads. OK stays OK.
[[nodiscard]] absl::Status WithMessage(const absl::Status& status, std::string_view message);

}  // namespace shardkit

#define SHARDKIT_STATUS_CONCAT_INNER_(a, b) a##b
#define SHARDKIT_STATUS_CONCAT_(a, b) SHARDKIT_STATUS_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status); returns it from the enclosing function if not OK.
#define SHARDKIT_RETURN_IF_ERROR(expr)                   \
  do {                                                   \
    ::absl::Status shardkit_status_ = (expr);            \
    if (!shardkit_status_.ok()) return shardkit_status_; \
  } while (false)

// Evaluates `rexpr` (an absl::StatusOr<T>); returns its status if not OK, else moves the value
// into `lhs` (which may be a declaration: `SHARDKIT_ASSIGN_OR_RETURN(auto x, F())`).
#define SHARDKIT_ASSIGN_OR_RETURN(lhs, rexpr) \
  SHARDKIT_ASSIGN_OR_RETURN_IMPL_(SHARDKIT_STATUS_CONCAT_(shardkit_statusor_, __LINE__), lhs, rexpr)

#define SHARDKIT_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                    \
  if (!statusor.ok()) return std::move(statusor).status();    \
  lhs = std::move(statusor).value()

#endif  // SHARDKIT_CORE_BASE_STATUS_MACROS_H_
