// Module: ordered, named parameter slots ("encoder.layers.0.weight" → Tensor or ShardedTensor).
//
//   Module m;
//   SHARDKIT_RETURN_IF_ERROR(m.AddParameter("embed.weight", std::move(t)));
//   SHARDKIT_ASSIGN_OR_RETURN(const Tensor* w, m.GetTensor("embed.weight"));
//
// Names are kept in insertion order (the order every rank iterates in). The sharding engine
// replaces a slot's tensor with a ShardedTensor (SetSharded) once every rank has committed.
// Thread-safety: none; a Module is owned by one thread at a time.
#ifndef SHARDKIT_CORE_ENGINE_MODULE_H_
#define SHARDKIT_CORE_ENGINE_MODULE_H_

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/engine/sharded_tensor.h"
#include "core/tensor/tensor.h"

namespace shardkit {

// A parameter name: non-empty dotted segments of printable ASCII without spaces.
// Errors: kInvalidArgument naming the name and what is wrong.
[[nodiscard]] absl::Status ValidateParameterName(std::string_view name);

class Module {
 public:
  // Errors: kInvalidArgument for a bad name; kAlreadyExists if the name is taken.
  [[nodiscard]] absl::Status AddParameter(std::string name, Tensor tensor);

  bool Contains(std::string_view name) const;

  // True if the slot holds a ShardedTensor. Errors: kNotFound naming the parameter.
  [[nodiscard]] absl::StatusOr<bool> IsSharded(std::string_view name) const;

  // The slot's tensor. Errors: kNotFound naming the parameter; kFailedPrecondition if the slot
  // holds a ShardedTensor.
  [[nodiscard]] absl::StatusOr<const Tensor*> GetTensor(std::string_view name) const;
  [[nodiscard]] absl::StatusOr<Tensor*> MutableTensor(std::string_view name);

  // The slot's ShardedTensor. Errors: kNotFound; kFailedPrecondition if it holds a plain Tensor.
  [[nodiscard]] absl::StatusOr<const ShardedTensor*> GetSharded(std::string_view name) const;

  // Replace an existing slot's content. Errors: kNotFound naming the parameter.
  [[nodiscard]] absl::Status SetTensor(std::string_view name, Tensor tensor);
  [[nodiscard]] absl::Status SetSharded(std::string_view name, ShardedTensor tensor);

  // The position of `name` in names(), or nullopt.
  std::optional<size_t> PositionOf(std::string_view name) const;
  // The slot at `position` (< size(), in names() order): its ShardedTensor or nullptr, its plain
  // Tensor or nullptr. For callers that resolve names once and read slots many times.
  const ShardedTensor* ShardedAt(size_t position) const;
  const Tensor* TensorAt(size_t position) const;

  // Parameter names in insertion order.
  const std::vector<std::string>& names() const { return names_; }
  size_t size() const { return names_.size(); }

 private:
  absl::StatusOr<size_t> IndexOf(std::string_view name) const;

  std::vector<std::string> names_;
  using Slot = std::variant<Tensor, ShardedTensor>;
  std::vector<Slot> slots_;
  absl::flat_hash_map<std::string, size_t> index_;
};

}  // namespace shardkit

#endif  // SHARDKIT_CORE_ENGINE_MODULE_H_
