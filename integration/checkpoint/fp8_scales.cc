#include "integration/checkpoint/fp8_scales.h"

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/check.h"
#include "core/base/status_macros.h"
#include "core/tensor/shape.h"

namespace shardkit::checkpoint {
namespace {

using specs::ShardMetadata;

constexpr char kPrefix[] = "FP8 block scales: ";

int64_t CeilDiv(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

bool IsEmpty(const ShardMetadata& shard) {
  for (int64_t size : shard.sizes) {
    if (size == 0) return true;
  }
  return false;
}

// A weight, its scales and the block of each of the weight's dims.
struct Pair {
  const LaidOutTensor& weight;
  const LaidOutTensor& scale;
  Shape blocks;
};

// B on the last two dims (the only one of a 1-d tensor), 1 on the leading ones.
Shape BlockSizes(size_t ndim, int64_t block) {
  Shape blocks(ndim, 1);
  for (size_t d = ndim >= 2 ? ndim - 2 : 0; d < ndim; ++d) blocks[d] = block;
  return blocks;
}

Shape ScaleShape(const Pair& pair) {
  Shape shape(pair.blocks.size());
  for (size_t d = 0; d < shape.size(); ++d)
    shape[d] = CeilDiv(pair.weight.shape[d], pair.blocks[d]);
  return shape;
}

// "layers.0.mlp.weight (F8_E4M3 [300, 256])"
std::string Describe(const LaidOutTensor& tensor) {
  return absl::StrCat(std::string(tensor.name), " (", std::string(SafetensorsName(tensor.dtype)),
                      " ", ShapeToString(Shape(tensor.shape.begin(), tensor.shape.end())), ")");
}

// "shard 1 (offsets [128, 0], sizes [128, 256], rank:1)"
std::string ShardText(const LaidOutTensor& tensor, size_t index) {
  return absl::StrCat("shard ", index, " (", ShardToString(tensor.shards[index]), ")");
}

// "one scale per 128×128 block"
std::string PerBlock(const Pair& pair) {
  return absl::StrCat("one scale per ", absl::StrJoin(pair.blocks, "×"), " block");
}

// The smallest (dim, position) at which a non-empty shard of the weight starts or ends off its
// dim's blocks (the dim's end excepted), with that shard's index.
struct Cut {
  size_t dim = 0;
  int64_t at = 0;
  size_t shard = 0;
  bool end = false;  // the shard ends there (else starts)
};
std::optional<Cut> FirstMisalignedCut(const Pair& pair) {
  std::optional<Cut> first;
  for (size_t i = 0; i < pair.weight.shards.size(); ++i) {
    const ShardMetadata& shard = pair.weight.shards[i];
    if (IsEmpty(shard)) continue;
    for (size_t d = 0; d < pair.blocks.size(); ++d) {
      for (bool end : {false, true}) {
        const int64_t at = shard.offsets[d] + (end ? shard.sizes[d] : 0);
        if (at % pair.blocks[d] == 0 || at == pair.weight.shape[d]) continue;
        if (!first || std::tie(d, at) < std::tie(first->dim, first->at)) first = Cut{d, at, i, end};
      }
    }
  }
  return first;
}

std::optional<std::string> CheckWeightCuts(const Pair& pair) {
  const std::optional<Cut> cut = FirstMisalignedCut(pair);
  if (!cut) return std::nullopt;
  const int64_t block = pair.blocks[cut->dim];
  return absl::StrCat(Describe(pair.weight), " is cut at ", cut->at, " on dim ", cut->dim,
                      ", where its ", ShardText(pair.weight, cut->shard),
                      cut->end ? " ends" : " starts", ": not a multiple of ", block,
                      ", but its scales ", Describe(pair.scale), " hold ", PerBlock(pair),
                      " (give the weight's chunk spec \"align\": ", block, ")");
}

// The scale blocks of a (block-aligned) weight shard, on the same placement.
ShardMetadata ScaleBlocks(const Pair& pair, const ShardMetadata& shard) {
  ShardMetadata out = shard;
  for (size_t d = 0; d < pair.blocks.size(); ++d) {
    out.offsets[d] = CeilDiv(shard.offsets[d], pair.blocks[d]);
    out.sizes[d] = CeilDiv(shard.offsets[d] + shard.sizes[d], pair.blocks[d]) - out.offsets[d];
  }
  return out;
}

// The non-empty scale shard holding the element at `point` (the layout tiles the scale).
size_t ScaleShardAt(const Pair& pair, const Shape& point) {
  for (size_t j = 0; j < pair.scale.shards.size(); ++j) {
    const ShardMetadata& shard = pair.scale.shards[j];
    bool inside = !IsEmpty(shard);
    for (size_t d = 0; inside && d < point.size(); ++d) {
      inside = shard.offsets[d] <= point[d] && point[d] < shard.offsets[d] + shard.sizes[d];
    }
    if (inside) return j;
  }
  SHARDKIT_CHECK(false) << "the layout of " << pair.scale.name << " does not tile it";
  return 0;
}

// Why weight shard i's blocks (`want`) are not scale shard j: the first boundary that differs.
std::string Difference(const Pair& pair, size_t i, const ShardMetadata& want, size_t j) {
  const ShardMetadata& weight = pair.weight.shards[i];
  const ShardMetadata& scale = pair.scale.shards[j];
  const std::string weight_text = absl::StrCat("the weight's ", ShardText(pair.weight, i));
  const std::string scale_text = absl::StrCat("the scale's ", ShardText(pair.scale, j));
  for (size_t d = 0; d < want.offsets.size(); ++d) {
    if (scale.offsets[d] != want.offsets[d]) {  // then scale.offsets[d] < want.offsets[d]
      return absl::StrCat(weight_text, " starts at ", weight.offsets[d], " on dim ", d, " (block ",
                          want.offsets[d], "), inside ", scale_text);
    }
    const int64_t scale_end = scale.offsets[d] + scale.sizes[d];
    const int64_t want_end = want.offsets[d] + want.sizes[d];
    if (scale_end < want_end) {
      return absl::StrCat(scale_text, " ends at block ", scale_end, " on dim ", d, " (index ",
                          scale_end * pair.blocks[d], " of the weight), inside ", weight_text);
    }
    if (scale_end > want_end) {
      return absl::StrCat(weight_text, " ends at ", weight.offsets[d] + weight.sizes[d], " on dim ",
                          d, " (block ", want_end, "), inside ", scale_text);
    }
  }
  return absl::StrCat(scale_text, " is on rank ", scale.placement.rank(), ", ", weight_text,
                      " on rank ", weight.placement.rank());
}

std::optional<std::string> CheckScaleCuts(const Pair& pair) {
  if (pair.scale.replicated) return std::nullopt;  // every rank holds every block's scale
  std::map<Shape, size_t> by_offsets;              // the scale's non-empty shards
  for (size_t j = 0; j < pair.scale.shards.size(); ++j) {
    if (!IsEmpty(pair.scale.shards[j])) by_offsets.emplace(pair.scale.shards[j].offsets, j);
  }
  for (size_t i = 0; i < pair.weight.shards.size(); ++i) {
    if (IsEmpty(pair.weight.shards[i])) continue;
    const ShardMetadata want = ScaleBlocks(pair, pair.weight.shards[i]);
    const auto found = by_offsets.find(want.offsets);
    const size_t j = found != by_offsets.end() ? found->second : ScaleShardAt(pair, want.offsets);
    const ShardMetadata& scale = pair.scale.shards[j];
    if (scale.sizes == want.sizes && scale.placement.rank() == want.placement.rank()) continue;
    return absl::StrCat(Describe(pair.scale), " is not cut like ", Describe(pair.weight), ", ",
                        PerBlock(pair), ": ", Difference(pair, i, want, j),
                        " (shard the scales on the weight's dim with its placements and no "
                        "align, or replicate them)");
  }
  return std::nullopt;
}

// The pair's verdict: a message on `warnings`, or the error.
absl::Status CheckPair(const Pair& pair, const Fp8ScaleOptions& options,
                       std::vector<std::string>& warnings) {
  if (pair.weight.replicated && pair.scale.replicated) return absl::OkStatus();  // no cut
  const Shape expected = ScaleShape(pair);
  if (!std::equal(expected.begin(), expected.end(), pair.scale.shape.begin(),
                  pair.scale.shape.end())) {
    warnings.push_back(absl::StrCat("warning: ", kPrefix, Describe(pair.scale),
                                    " does not have the shape ", ShapeToString(expected), " of ",
                                    PerBlock(pair), " of ", Describe(pair.weight), " (--fp8-block ",
                                    options.block, "): not checked"));
    return absl::OkStatus();
  }
  std::optional<std::string> problem = CheckWeightCuts(pair);
  if (!problem) problem = CheckScaleCuts(pair);
  if (!problem) return absl::OkStatus();
  if (!options.allow_misaligned) return absl::InvalidArgumentError(kPrefix + *problem);
  warnings.push_back(
      absl::StrCat("warning: ", kPrefix, *problem, "; sharded anyway (--allow-misaligned-scales)"));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> CheckFp8Scales(absl::Span<const LaidOutTensor> tensors,
                                                        const Fp8ScaleOptions& options) {
  if (options.block < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("the FP8 block size must be >= 1, got ", options.block));
  }
  std::unordered_map<std::string_view, size_t> index_of;
  for (size_t t = 0; t < tensors.size(); ++t) index_of.emplace(tensors[t].name, t);
  std::vector<std::string> warnings;
  for (const LaidOutTensor& weight : tensors) {
    if (!SafetensorsName(weight.dtype).starts_with("F8_")) continue;
    const auto scale = index_of.find(std::string(weight.name) + "_scale_inv");
    if (scale == index_of.end()) continue;
    const Pair pair{weight, tensors[scale->second], BlockSizes(weight.shape.size(), options.block)};
    SHARDKIT_RETURN_IF_ERROR(CheckPair(pair, options, warnings));
  }
  return warnings;
}

}  // namespace shardkit::checkpoint
