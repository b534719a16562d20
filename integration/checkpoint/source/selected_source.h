// Choosing what a command reads from a checkpoint: `gather --include/--exclude/--strip-prefix`
// and `reshard --include/--exclude`. A TensorSelection picks tensors (and a DCP checkpoint's
// non-tensor items) by the plan's name patterns (specs/pattern.h) and may drop a prefix from the
// names; SelectedSource shows only the picked tensors of another source, under their new names, in
// name order over a virtual data region of their own, and reads each from the source it wraps.
//
//   TensorSelection select{.include = {"model.**"}, .strip_prefix = "model."};
//   SHARDKIT_RETURN_IF_ERROR(ValidateSelection(select));
//   SHARDKIT_ASSIGN_OR_RETURN(source, SelectTensors(std::move(source), select, {}, &warnings));
//
// A name is picked when it matches an --include pattern (or none is given) and no --exclude
// pattern. --strip-prefix PREFIX removes PREFIX from the picked names that begin with it; others
// keep their names (a warning counts them). A pattern that picks or drops nothing is a warning,
// an error under --strict; so is a selection that leaves nothing.
#ifndef SHARDKIT_INTEGRATION_CHECKPOINT_SOURCE_SELECTED_SOURCE_H_
#define SHARDKIT_INTEGRATION_CHECKPOINT_SOURCE_SELECTED_SOURCE_H_

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "integration/checkpoint/source/tensor_source.h"

namespace shardkit::checkpoint {

struct TensorSelection {
  std::vector<std::string> include;  // --include, in order
  std::vector<std::string> exclude;  // --exclude
  std::string strip_prefix;          // --strip-prefix (gather only)
  bool strict = false;               // --strict: what would be a warning is an error

  bool empty() const { return include.empty() && exclude.empty() && strip_prefix.empty(); }
  // Whether `name` is picked (the prefix plays no part).
  bool Picks(const std::string& name) const;
  // `name` without strip_prefix when it begins with it (and is longer), else `name`.
  std::string Renamed(const std::string& name) const;
};

// Every pattern passes specs::ValidatePattern. Errors: kInvalidArgument naming the flag and the
// pattern ("--include \"a**\": ...").
[[nodiscard]] absl::Status ValidateSelection(const TensorSelection& selection);

// `source` seen through `selection` (itself when the selection is empty). `items` are further
// names that patterns may match (a DCP checkpoint's non-tensor items): a pattern that matches one
// of them is not idle. Warnings (idle patterns, names without the prefix) are appended to
// `warnings`, each a line beginning "warning: ".
// Errors: kInvalidArgument under `selection.strict` for what would be a warning; for a selection
// that leaves no tensor; for two picked names that become one once the prefix is stripped (naming
// both).
[[nodiscard]] absl::StatusOr<std::unique_ptr<TensorSource>> SelectTensors(
    std::unique_ptr<TensorSource> source, const TensorSelection& selection,
    const std::vector<std::string>& items, std::vector<std::string>* warnings);

class SelectedSource : public TensorSource {
 public:
  // `picked`: indices into `source`'s header, in the order of `names` (sorted).
  SelectedSource(std::unique_ptr<TensorSource> source, std::vector<size_t> picked,
                 const std::vector<std::string>& names);

  const safetensors::Header& header() const override { return header_; }
  const std::vector<CheckpointFile>& identity() const override { return source_->identity(); }
  [[nodiscard]] absl::Status ReadBytes(size_t t, int64_t offset, int64_t size,
                                       std::byte* dst) const override {
    return source_->ReadBytes(picked_[t], offset, size, dst);
  }
  [[nodiscard]] absl::Status CheckUnchanged(size_t t) const override {
    return source_->CheckUnchanged(picked_[t]);
  }
  const void* FilesOf(size_t t) const override { return source_->FilesOf(picked_[t]); }
  std::optional<FileReads> file_reads() const override { return source_->file_reads(); }
  std::optional<FileRange> FileRangeOf(size_t t, int64_t offset, int64_t size) const override {
    return source_->FileRangeOf(picked_[t], offset, size);
  }

 private:
  std::unique_ptr<TensorSource> source_;
  std::vector<size_t> picked_;
  safetensors::Header header_;
};

}  // namespace shardkit::checkpoint

#endif  // SHARDKIT_INTEGRATION_CHECKPOINT_SOURCE_SELECTED_SOURCE_H_
