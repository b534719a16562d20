#include "integration/checkpoint/source/selected_source.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/quote.h"
#include "core/base/status_macros.h"
#include "specs/pattern.h"

namespace shardkit::checkpoint {
namespace {

bool AnyMatch(const std::vector<std::string>& patterns, const std::string& name) {
  return std::any_of(patterns.begin(), patterns.end(),
                     [&](const std::string& p) { return specs::MatchesPattern(p, name); });
}

// A warning, or under `strict` the error, for `what` (a sentence without "warning: ").
absl::Status Complain(const std::string& what, bool strict, std::vector<std::string>* warnings) {
  if (strict) return absl::InvalidArgumentError(absl::StrCat(what, " (--strict)"));
  warnings->push_back(absl::StrCat("warning: ", what));
  return absl::OkStatus();
}

// Every pattern of `flag` matches some name of `names` or `items`.
absl::Status CheckUsed(const char* flag, const std::vector<std::string>& patterns,
                       const std::vector<std::string>& names, const std::vector<std::string>& items,
                       bool strict, std::vector<std::string>* warnings) {
  for (const std::string& pattern : patterns) {
    const auto matches = [&](const std::string& name) {
      return specs::MatchesPattern(pattern, name);
    };
    if (std::any_of(names.begin(), names.end(), matches) ||
        std::any_of(items.begin(), items.end(), matches)) {
      continue;
    }
    SHARDKIT_RETURN_IF_ERROR(Complain(
        absl::StrCat("--", flag, " ", QuoteName(pattern), " matches no name in the checkpoint"),
        strict, warnings));
  }
  return absl::OkStatus();
}

// The picked names once the prefix is stripped, with a word about those without it.
absl::StatusOr<std::vector<std::string>> NewNames(const std::vector<std::string>& picked,
                                                  const TensorSelection& selection, bool strict,
                                                  std::vector<std::string>* warnings) {
  const std::string& prefix = selection.strip_prefix;
  std::vector<std::string> names;
  std::vector<std::string> kept;  // picked names without the prefix
  for (const std::string& name : picked) {
    names.push_back(selection.Renamed(name));
    if (!prefix.empty() && names.back() == name) kept.push_back(name);
  }
  if (!kept.empty()) {
    const size_t shown = std::min<size_t>(kept.size(), 3);
    SHARDKIT_RETURN_IF_ERROR(Complain(
        absl::StrCat(
            kept.size(), " of the ", picked.size(),
            " tensors picked do not begin with --strip-prefix ", QuoteName(prefix),
            " and keep their names: ",
            absl::StrJoin(kept.begin(), kept.begin() + static_cast<ptrdiff_t>(shown), ", "),
            kept.size() > shown ? ", ..." : ""),
        strict, warnings));
  }
  return names;
}

}  // namespace

bool TensorSelection::Picks(const std::string& name) const {
  return (include.empty() || AnyMatch(include, name)) && !AnyMatch(exclude, name);
}

std::string TensorSelection::Renamed(const std::string& name) const {
  if (strip_prefix.empty() || name.size() <= strip_prefix.size() ||
      !absl::StartsWith(name, strip_prefix)) {
    return name;
  }
  return name.substr(strip_prefix.size());
}

absl::Status ValidateSelection(const TensorSelection& selection) {
  for (const auto& [flag, patterns] :
       {std::pair{"include", &selection.include}, std::pair{"exclude", &selection.exclude}}) {
    for (const std::string& pattern : *patterns) {
      const absl::Status status = specs::ValidatePattern(pattern);
      if (!status.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", flag, " ", QuoteName(pattern), ": ", status.message()));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<TensorSource>> SelectTensors(std::unique_ptr<TensorSource> source,
                                                            const TensorSelection& selection,
                                                            const std::vector<std::string>& items,
                                                            std::vector<std::string>* warnings) {
  if (selection.empty()) return source;
  const bool strict = selection.strict;
  std::vector<std::string> names;
  for (const safetensors::TensorInfo& info : source->header().tensors) names.push_back(info.name);
  SHARDKIT_RETURN_IF_ERROR(CheckUsed("include", selection.include, names, items, strict, warnings));
  SHARDKIT_RETURN_IF_ERROR(CheckUsed("exclude", selection.exclude, names, items, strict, warnings));
  std::vector<size_t> picked;
  std::vector<std::string> picked_names;
  for (size_t i = 0; i < names.size(); ++i) {
    if (!selection.Picks(names[i])) continue;
    picked.push_back(i);
    picked_names.push_back(names[i]);
  }
  if (picked.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--include/--exclude leave none of the ",
                                                   names.size(), " tensors of the checkpoint"));
  }
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<std::string> renamed,
                            NewNames(picked_names, selection, strict, warnings));
  std::vector<size_t> order(picked.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return renamed[a] < renamed[b]; });
  for (size_t i = 1; i < order.size(); ++i) {
    if (renamed[order[i]] == renamed[order[i - 1]]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--strip-prefix ", QuoteName(selection.strip_prefix), " gives ",
          QuoteName(picked_names[order[i - 1]]), " and ", QuoteName(picked_names[order[i]]),
          " the same name ", QuoteName(renamed[order[i]])));
    }
  }
  std::vector<size_t> sorted_picked;
  std::vector<std::string> sorted_names;
  for (size_t i : order) {
    sorted_picked.push_back(picked[i]);
    sorted_names.push_back(renamed[i]);
  }
  return std::unique_ptr<TensorSource>(
      new SelectedSource(std::move(source), std::move(sorted_picked), sorted_names));
}

SelectedSource::SelectedSource(std::unique_ptr<TensorSource> source, std::vector<size_t> picked,
                               const std::vector<std::string>& names)
    : source_(std::move(source)), picked_(std::move(picked)) {
  const safetensors::Header& in = source_->header();
  header_.metadata = in.metadata;
  uint64_t at = 0;
  for (size_t i = 0; i < picked_.size(); ++i) {
    safetensors::TensorInfo info = in.tensors[picked_[i]];
    const uint64_t size = info.end - info.begin;
    info.name = names[i];
    info.begin = at;
    info.end = at + size;
    at = info.end;
    header_.tensors.push_back(std::move(info));
  }
}

}  // namespace shardkit::checkpoint
