// CheckFp8Scales: a layout must keep block-quantized FP8 weights and their scales together — the
// check `shardkit shard` runs on the agreed layouts before any file is touched (and that
// `reshard` can run on its new layouts too).
//
// DeepSeek-V3 and Qwen3-FP8 checkpoints store a weight `X.weight` (F8_E4M3) beside
// `X.weight_scale_inv` (F32): one scale per B×B block of the weight (B = 128), shape
// [ceil(rows/B), ceil(cols/B)]. A rank can dequantize its shard of the weight only if the shard is
// made of whole blocks and the rank holds exactly those blocks' scales; a misaligned cut silently
// produces wrong values. For every F8_* tensor P whose tensors also hold P + "_scale_inv" (S):
//   - the block of each dim of P: B on the last two dims (on the only one of a 1-d P), 1 on the
//     leading ones (stacked experts [E, rows, cols] have scales [E, ceil(rows/B), ceil(cols/B)]);
//   - S must have the shape ceil(P.shape[d] / block[d]); another shape is a warning and the pair
//     is not checked (another block size, or per-tensor scales);
//   - every boundary of P's non-empty shards is a multiple of its dim's block, or the dim's end;
//   - S is replicated (every rank holds every scale), or its non-empty shards are exactly the
//     blocks of P's non-empty shards, each on the rank that holds those blocks of P.
// Zero-size shards hold nothing and are ignored; a pair with both tensors replicated has no cut
// to check. With `allow_misaligned` each failed check is a warning instead (and the pair's
// remaining checks are skipped). The verdict depends on the layouts only, so every rank that
// agreed on them reaches the same one, with the same message.
//
//   std::vector<LaidOutTensor> tensors;  // the checkpoint's tensors with their agreed layouts
//   tensors.push_back({info.name, info.dtype, info.shape, !spec.has_value(), shards});
//   SHARDKIT_ASSIGN_OR_RETURN(std::vector<std::string> warnings,
//                             CheckFp8Scales(tensors, {.block = 128}));
#ifndef SHARDKIT_INTEGRATION_CHECKPOINT_FP8_SCALES_H_
#define SHARDKIT_INTEGRATION_CHECKPOINT_FP8_SCALES_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/tensor/dtype.h"
#include "specs/shard_metadata.h"

namespace shardkit::checkpoint {

// `--fp8-block`'s default: DeepSeek-V3's and Qwen3-FP8's 128×128 blocks.
inline constexpr int64_t kDefaultFp8Block = 128;

struct Fp8ScaleOptions {
  int64_t block = kDefaultFp8Block;  // B, >= 1 (--fp8-block)
  bool allow_misaligned = false;     // failed checks are warnings (--allow-misaligned-scales)
};

// One tensor with its layout (views: the caller keeps the data alive during the call).
struct LaidOutTensor {
  std::string_view name;
  DType dtype = DType::kFloat32;
  absl::Span<const int64_t> shape;
  bool replicated = false;
  // The layout's shards in spec order; replicated: one whole-tensor shard per rank (as
  // specs::LayOutParameter lays it out). They must tile the tensor.
  absl::Span<const specs::ShardMetadata> shards;
};

// The checks above over every weight/scale pair of `tensors`, in their order. Returns the
// warnings, each a line starting "warning: FP8 block scales: ".
// Errors: kInvalidArgument naming both tensors and the first bad boundary (a weight cut off its
// blocks, a scale not cut at the weight's block boundaries or placed on other ranks), unless
// `allow_misaligned`; kInvalidArgument if `options.block` < 1.
[[nodiscard]] absl::StatusOr<std::vector<std::string>> CheckFp8Scales(
    absl::Span<const LaidOutTensor> tensors, const Fp8ScaleOptions& options);

}  // namespace shardkit::checkpoint

#endif  // SHARDKIT_INTEGRATION_CHECKPOINT_FP8_SCALES_H_
