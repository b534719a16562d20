#include "core/engine/module.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/base/quote.h"
#include "core/base/status_macros.h"

namespace shardkit {
namespace {

absl::string_view View(std::string_view s) { return absl::string_view(s.data(), s.size()); }

}  // namespace

absl::Status ValidateParameterName(std::string_view name) {
  if (name.empty()) return absl::InvalidArgumentError("parameter name is empty");
  bool segment_empty = true;
  for (char c : name) {
    if (c <= ' ' || c > '~') {
      return absl::InvalidArgumentError(absl::StrCat(
          "parameter name ", QuoteName(name), " contains a space, control or non-ASCII character"));
    }
    if (c == '.') {
      if (segment_empty) break;
      segment_empty = true;
    } else {
      segment_empty = false;
    }
  }
  if (segment_empty) {
    return absl::InvalidArgumentError(
        absl::StrCat("parameter name ", QuoteName(name), " has an empty dotted segment"));
  }
  return absl::OkStatus();
}

absl::Status Module::AddParameter(std::string name, Tensor tensor) {
  SHARDKIT_RETURN_IF_ERROR(ValidateParameterName(name));
  if (index_.contains(name)) {
    return absl::AlreadyExistsError(absl::StrCat("parameter ", name, " already exists"));
  }
  index_.emplace(name, names_.size());
  names_.push_back(std::move(name));
  slots_.push_back(std::move(tensor));
  return absl::OkStatus();
}

bool Module::Contains(std::string_view name) const { return index_.contains(View(name)); }

std::optional<size_t> Module::PositionOf(std::string_view name) const {
  auto it = index_.find(View(name));
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

const ShardedTensor* Module::ShardedAt(size_t position) const {
  return std::get_if<ShardedTensor>(&slots_[position]);
}

const Tensor* Module::TensorAt(size_t position) const {
  return std::get_if<Tensor>(&slots_[position]);
}

absl::StatusOr<size_t> Module::IndexOf(std::string_view name) const {
  auto it = index_.find(View(name));
  if (it == index_.end()) {
    return absl::NotFoundError(absl::StrCat("module has no parameter ", QuoteName(name)));
  }
  return it->second;
}

absl::StatusOr<bool> Module::IsSharded(std::string_view name) const {
  SHARDKIT_ASSIGN_OR_RETURN(size_t i, IndexOf(name));
  return std::holds_alternative<ShardedTensor>(slots_[i]);
}

absl::StatusOr<const Tensor*> Module::GetTensor(std::string_view name) const {
  SHARDKIT_ASSIGN_OR_RETURN(size_t i, IndexOf(name));
  if (const Tensor* t = std::get_if<Tensor>(&slots_[i])) return t;
  return absl::FailedPreconditionError(
      absl::StrCat("parameter ", QuoteName(name), " is sharded, not a plain tensor"));
}

absl::StatusOr<Tensor*> Module::MutableTensor(std::string_view name) {
  SHARDKIT_ASSIGN_OR_RETURN(const Tensor* t, std::as_const(*this).GetTensor(name));
  return const_cast<Tensor*>(t);
}

absl::StatusOr<const ShardedTensor*> Module::GetSharded(std::string_view name) const {
  SHARDKIT_ASSIGN_OR_RETURN(size_t i, IndexOf(name));
  if (const ShardedTensor* t = std::get_if<ShardedTensor>(&slots_[i])) return t;
  return absl::FailedPreconditionError(
      absl::StrCat("parameter ", QuoteName(name), " is not sharded"));
}

absl::Status Module::SetTensor(std::string_view name, Tensor tensor) {
  SHARDKIT_ASSIGN_OR_RETURN(size_t i, IndexOf(name));
  slots_[i] = std::move(tensor);
  return absl::OkStatus();
}

absl::Status Module::SetSharded(std::string_view name, ShardedTensor tensor) {
  SHARDKIT_ASSIGN_OR_RETURN(size_t i, IndexOf(name));
  slots_[i] = std::move(tensor);
  return absl::OkStatus();
}

}  // namespace shardkit
