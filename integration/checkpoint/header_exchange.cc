#include "integration/checkpoint/header_exchange.h"

#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/base/rank_text.h"

namespace shardkit::checkpoint {
namespace {

// How sizes travel in the header exchange: 8 bytes, little-endian.
void AppendUint64(std::string& out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(value >> (8 * i)));
}

uint64_t ReadUint64(std::string_view bytes) {  // bytes.size() >= 8
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = value << 8 | static_cast<unsigned char>(bytes[i]);
  return value;
}

// "rank 1: 8 MiB; ranks 0, 2: 512 MiB" for the option at byte `offset` of the shared options, or
// "" when every rank has the same value.
template <typename Describe>
std::string Differing(const std::vector<std::string>& shared, size_t offset, Describe describe) {
  std::map<int64_t, std::vector<int>> ranks_of;
  for (size_t rank = 0; rank < shared.size(); ++rank) {
    ranks_of[static_cast<int64_t>(ReadUint64(std::string_view(shared[rank]).substr(offset)))]
        .push_back(static_cast<int>(rank));
  }
  if (ranks_of.size() == 1) return "";
  std::vector<std::string> parts;
  for (const auto& [value, ranks] : ranks_of) {
    parts.push_back(absl::StrCat(FormatRanks(ranks), ": ", describe(value)));
  }
  return absl::StrJoin(parts, "; ");
}

// FNV-1a over the selection's patterns, each kind and pattern ended by a byte that no pattern
// holds: the same in every process (absl::Hash is seeded per process).
uint64_t SelectionDigest(const TensorSelection& select) {
  uint64_t digest = 14695981039346656037ull;
  const auto add = [&](std::string_view text) {
    for (const char c : text) digest = (digest ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    digest = (digest ^ 0xffu) * 1099511628211ull;
  };
  for (const std::string& pattern : select.include) add(absl::StrCat("+", pattern));
  for (const std::string& pattern : select.exclude) add(absl::StrCat("-", pattern));
  add(absl::StrCat("/", select.strip_prefix));
  return digest;
}

}  // namespace

std::string EncodeHeader(const safetensors::Header& header) {
  std::string out;
  AppendUint64(out, header.tensors.empty() ? 0 : header.tensors.back().end);
  return out + safetensors::SerializeHeader(header.tensors, header.metadata);
}

absl::StatusOr<safetensors::Header> DecodeHeader(std::string_view bytes, int64_t src_rank) {
  if (bytes.size() < 8) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", src_rank, " sent no checkpoint header (do the ranks agree on the source rank?)"));
  }
  return safetensors::ParseHeader(bytes.substr(8), ReadUint64(bytes),
                                  absl::StrCat("checkpoint header from rank ", src_rank));
}

std::string EncodeRankOptions(const ShardWriteOptions& options) {
  std::string out;
  AppendUint64(out, static_cast<uint64_t>(options.memory_bytes));
  AppendUint64(out, static_cast<uint64_t>(options.fp8.block));
  AppendUint64(out, options.fp8.allow_misaligned ? 1 : 0);
  AppendUint64(out, options.strict ? 1 : 0);
  AppendUint64(out, options.format == OutputFormat::kDcp ? 1 : 0);
  AppendUint64(out, SelectionDigest(options.select));
  return out;
}

// The budget sets the rounds every rank follows, and the FP8 options and --strict the verdicts of
// checks every rank runs alone: all ranks must be given the same ones. The same verdict on every
// rank (it is computed from the same bytes).
absl::Status CheckSameOptions(const std::vector<std::string>& shared) {
  const std::string budgets = Differing(shared, 0, [](int64_t bytes) {
    return bytes % (1 << 20) == 0 ? absl::StrCat(bytes >> 20, " MiB")
                                  : absl::StrCat(bytes, " bytes");
  });
  if (!budgets.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the ranks were given different memory budgets (--memory-mib): ", budgets));
  }
  const std::string blocks =
      Differing(shared, 8, [](int64_t block) { return absl::StrCat(block); });
  if (!blocks.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the ranks were given different FP8 block sizes (--fp8-block): ", blocks));
  }
  const auto set = [](int64_t flag) { return flag != 0 ? "set" : "not set"; };
  const std::string allow = Differing(shared, 16, set);
  if (!allow.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the ranks were given different --allow-misaligned-scales: ", allow));
  }
  const std::string strict = Differing(shared, 24, set);
  if (!strict.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the ranks were given different --strict: ", strict));
  }
  const std::string formats =
      Differing(shared, 32, [](int64_t dcp) { return dcp != 0 ? "dcp" : "shardkit"; });
  if (!formats.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the ranks were given different output formats (--format): ", formats));
  }
  const std::string selections = Differing(
      shared, 40, [](int64_t digest) { return absl::StrFormat("selection %016x", digest); });
  if (!selections.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the ranks were given different --include/--exclude patterns: ", selections));
  }
  return absl::OkStatus();
}

}  // namespace shardkit::checkpoint
