// Pickle's accessors (pickle_reader.h): the value tree read back, and the checked access that
// interpreters use.
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/base/quote.h"
#include "core/base/status_macros.h"
#include "integration/formats/pickle/pickle_reader.h"

namespace shardkit::pickle {
namespace {

// Debian's Abseil takes its own string_view in StrCat, not std::string_view.
absl::string_view AbslView(std::string_view s) { return absl::string_view(s.data(), s.size()); }

}  // namespace

double Pickle::float_value(Id id) const {
  double value = 0;
  const uint64_t bits = static_cast<uint64_t>(nodes_[id].scalar);
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

std::string_view Pickle::text(Id id) const {
  const Node& node = nodes_[id];
  if (node.kind != PickleKind::kStr && node.kind != PickleKind::kBytes) return {};
  return std::string_view(input_).substr(static_cast<size_t>(node.scalar), node.size);
}

std::vector<Pickle::Id> Pickle::items(Id id) const {
  const Node& node = nodes_[id];
  std::vector<Id> out;
  switch (node.kind) {
    case PickleKind::kTuple:
    case PickleKind::kList:
    case PickleKind::kDict:
      out.reserve(node.size);
      for (uint32_t s = node.first(); s != kNoValue; s = segments_[s].next) {
        const Segment& segment = segments_[s];
        out.insert(out.end(), children_.begin() + segment.begin,
                   children_.begin() + segment.begin + segment.count);
      }
      return out;
    case PickleKind::kPersistentId:
      return {node.first()};
    default:
      return out;
  }
}

size_t Pickle::size(Id id) const {
  const Node& node = nodes_[id];
  return node.kind == PickleKind::kDict ? node.size / 2 : node.size;
}

std::string Pickle::Describe(Id id) const {
  const Node& node = nodes_[id];
  switch (node.kind) {
    case PickleKind::kNone:
      return "None";
    case PickleKind::kBool:
      return node.scalar != 0 ? "bool True" : "bool False";
    case PickleKind::kInt:
      return absl::StrCat("int ", node.scalar);
    case PickleKind::kFloat:
      return absl::StrCat("float ", float_value(id));
    case PickleKind::kStr:
      return absl::StrCat("str ", QuoteName(text(id)));
    case PickleKind::kBytes:
      return absl::StrCat("bytes of length ", node.size);
    case PickleKind::kTuple:
      return absl::StrCat("tuple of ", node.size);
    case PickleKind::kList:
      return absl::StrCat("list of ", node.size);
    case PickleKind::kDict:
      return absl::StrCat("dict of ", node.size / 2);
    case PickleKind::kGlobal:
      if (node.global == PickleGlobal::kDType) {
        return absl::StrCat("global torch.", AbslView(DTypeName(node.dtype)));
      }
      return absl::StrCat("global ", AbslView(PickleGlobalName(node.global)));
    case PickleKind::kObject:
      return absl::StrCat(AbslView(PickleGlobalName(node.global)), " object");
    case PickleKind::kPersistentId:
      return "persistent id";
  }
  return "?";
}

absl::Status Pickle::Unexpected(Id id, std::string_view what, std::string_view expected) const {
  return absl::InvalidArgumentError(absl::StrCat("pickle byte ", offset(id), ": ", AbslView(what),
                                                 ": expected ", AbslView(expected), ", found ",
                                                 Describe(id)));
}

absl::StatusOr<int64_t> Pickle::Int(Id id, std::string_view what) const {
  if (kind(id) != PickleKind::kInt) return Unexpected(id, what, "an int");
  return int_value(id);
}

absl::StatusOr<bool> Pickle::Bool(Id id, std::string_view what) const {
  if (kind(id) != PickleKind::kBool) return Unexpected(id, what, "a bool");
  return int_value(id) != 0;
}

absl::StatusOr<std::string_view> Pickle::Str(Id id, std::string_view what) const {
  if (kind(id) != PickleKind::kStr) return Unexpected(id, what, "a str");
  return text(id);
}

absl::StatusOr<std::vector<Pickle::Id>> Pickle::Tuple(Id id, std::string_view what,
                                                      int count) const {
  if (kind(id) != PickleKind::kTuple || (count >= 0 && size(id) != static_cast<size_t>(count))) {
    return Unexpected(id, what,
                      count >= 0 ? absl::StrCat("a tuple of ", count) : std::string("a tuple"));
  }
  return items(id);
}

absl::StatusOr<std::vector<Pickle::Id>> Pickle::DataclassFields(
    Id id, PickleGlobal global, const std::vector<std::string_view>& fields,
    std::string_view what) const {
  if (kind(id) != PickleKind::kObject || this->global(id) != global) {
    return Unexpected(id, what, absl::StrCat("a ", AbslView(PickleGlobalName(global)), " object"));
  }
  std::vector<Id> values(fields.size(), kNoValue);
  const Id dict = state(id);
  if (dict == kNoValue) return values;
  if (kind(dict) != PickleKind::kDict) return Unexpected(dict, what, "a dict state");
  const std::vector<Id> pairs = items(dict);
  for (size_t i = 0; i < pairs.size(); i += 2) {
    SHARDKIT_ASSIGN_OR_RETURN(const std::string_view key,
                              Str(pairs[i], absl::StrCat(AbslView(what), " field name")));
    size_t f = 0;
    while (f < fields.size() && fields[f] != key) ++f;
    if (f == fields.size()) {
      return absl::InvalidArgumentError(absl::StrCat("pickle byte ", offset(pairs[i]), ": ",
                                                     AbslView(what), ": unknown field ",
                                                     QuoteName(key)));
    }
    if (values[f] != kNoValue) {
      return absl::InvalidArgumentError(absl::StrCat("pickle byte ", offset(pairs[i]), ": ",
                                                     AbslView(what), ": field ", QuoteName(key),
                                                     " twice"));
    }
    values[f] = pairs[i + 1];
  }
  return values;
}

absl::StatusOr<std::vector<Pickle::Id>> Pickle::ReduceArgs(Id id, PickleGlobal global,
                                                           std::string_view what, int count) const {
  if (kind(id) != PickleKind::kObject || this->global(id) != global) {
    return Unexpected(id, what, absl::StrCat("a ", AbslView(PickleGlobalName(global)), " object"));
  }
  return Tuple(args(id), absl::StrCat(AbslView(what), " arguments"), count);
}

}  // namespace shardkit::pickle
