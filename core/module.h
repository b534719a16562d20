// Module: ordered, named parameter slots ("encoder.layers.0.weight" → Tensor).
//
//   Module m;
//   SHARDKIT_RETURN_IF_ERROR(m.AddParameter("embed.weight", std::move(t)));
//   SHARDKIT_ASSIGN_OR_RETURN(const Tensor* w, m.GetTensor("embed.weight"));
//
// Names are kept in insertion order (the order every rank iterates in). The sharding engine
// replaces a slot's tensor with a ShardedTensor.
// Thread-safety: none; a Module is owned by one thread at a time.
#ifndef SHARDKIT_CORE_MODULE_H_
#define SHARDKIT_CORE_MODULE_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/tensor.h"

namespace shardkit {

// A parameter name: non-empty dotted segments of printable ASCII without spaces.
// Errors: kInvalidArgument naming the name and what is wrong.
[[nodiscard]] absl::Status ValidateParameterName(std::string_view name);

class Module {
 public:
  // Errors: kInvalidArgument for a bad name; kAlreadyExists if the name is taken.
  [[nodiscard]] absl::Status AddParameter(std::string name, Tensor tensor);

  bool Contains(std::string_view name) const;

  // Errors: kNotFound naming the parameter.
  [[nodiscard]] absl::StatusOr<const Tensor*> GetTensor(std::string_view name) const;
  [[nodiscard]] absl::StatusOr<Tensor*> MutableTensor(std::string_view name);

  // Replaces an existing slot's tensor. Errors: kNotFound naming the parameter.
  [[nodiscard]] absl::Status SetTensor(std::string_view name, Tensor tensor);

  // Parameter names in insertion order.
  const std::vector<std::string>& names() const { return names_; }
  size_t size() const { return names_.size(); }

 private:
  absl::StatusOr<size_t> IndexOf(std::string_view name) const;

  std::vector<std::string> names_;
  std::vector<Tensor> tensors_;
  absl::flat_hash_map<std::string, size_t> index_;
};

}  // namespace shardkit

#endif  // SHARDKIT_CORE_MODULE_H_
