// CheckFp8Scales on layouts built from real specs (specs::LayOutParameter): aligned weights and
// matching scales pass; misaligned cuts, scales cut elsewhere or on other ranks fail naming both
// tensors and the boundary; the override, shapes that do not fit and replicated scales.
#include "integration/checkpoint/fp8_scales.h"

#include <optional>
#include <string>
#include <vector>

#include "specs/parameter_layout.h"
#include "specs/spec_json.h"
#include "testing/status_matchers.h"

namespace shardkit::checkpoint {
namespace {

using ::shardkit::testing::IsOkAndHolds;
using ::shardkit::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

constexpr DType kF8 = DType::kFloat8E4M3;
constexpr DType kF32 = DType::kFloat32;

// A tensor with the layout `spec` gives it ("" = replicated) in a world of `world` ranks.
struct Laid {
  std::string name;
  DType dtype;
  Shape shape;
  specs::ParameterLayout layout;
};

Laid Lay(std::string name, DType dtype, Shape shape, std::string_view spec, int world = 3) {
  std::optional<specs::ShardingSpec> parsed;
  if (!spec.empty()) parsed = *specs::ParseSpec(spec);
  absl::StatusOr<specs::ParameterLayout> layout = specs::LayOutParameter(parsed, shape, world);
  EXPECT_TRUE(layout.ok()) << layout.status();
  return {std::move(name), dtype, std::move(shape), *std::move(layout)};
}

absl::StatusOr<std::vector<std::string>> Check(const std::vector<Laid>& laid,
                                               Fp8ScaleOptions options = {}) {
  std::vector<LaidOutTensor> tensors;
  for (const Laid& t : laid) {
    tensors.push_back({t.name, t.dtype, t.shape, !t.layout.spec.has_value(), t.layout.shards});
  }
  return CheckFp8Scales(tensors, options);
}

constexpr char kRows128[] =
    R"({"type": "chunk", "dim": 0, "align": 128, "placements": ["rank:0", "rank:1", "rank:2"]})";
constexpr char kRows[] =
    R"({"type": "chunk", "dim": 0, "placements": ["rank:0", "rank:1", "rank:2"]})";
constexpr char kWeight[] = "layers.0.mlp.weight";
constexpr char kScale[] = "layers.0.mlp.weight_scale_inv";

Laid Weight(std::string_view spec, Shape shape = {300, 256}) {
  return Lay(kWeight, kF8, std::move(shape), spec);
}
Laid Scale(std::string_view spec, Shape shape = {3, 2}) {
  return Lay(kScale, kF32, std::move(shape), spec);
}

TEST(Fp8ScalesTest, AlignedWeightWithMatchingScalesPasses) {
  EXPECT_THAT(Check({Weight(kRows128), Scale(kRows)}), IsOkAndHolds(IsEmpty()));
  // Columns: the weight's dim 1 on 128-column blocks, the scale's dim 1.
  EXPECT_THAT(
      Check({Weight(R"({"type": "chunk", "dim": 1, "align": 128,
                                "placements": ["rank:2", "rank:0", "rank:1"]})",
                    {256, 300}),
             Scale(R"({"type": "chunk", "dim": -1, "placements": ["rank:2", "rank:0", "rank:1"]})",
                   {2, 3})}),
      IsOkAndHolds(IsEmpty()));
  // Four placements: the weight's last chunk and the scale's are zero-size (ignored).
  const char* four = R"({"type": "chunk", "dim": 0, "placements": {"ranks": [0, 1, 2, 0]}})";
  EXPECT_THAT(Check({Weight(R"({"type": "chunk", "dim": 0, "align": 128,
                                "placements": {"ranks": [0, 1, 2, 0]}})"),
                     Scale(four)}),
              IsOkAndHolds(IsEmpty()));
  // A 2x2 grid of whole blocks and the scales' grid on the same ranks.
  EXPECT_THAT(Check({Weight(R"({"type": "enumerable", "shards": [
          {"offsets": [0, 0], "sizes": [128, 128], "placement": "rank:0"},
          {"offsets": [0, 128], "sizes": [128, 172], "placement": "rank:1"},
          {"offsets": [128, 0], "sizes": [172, 128], "placement": "rank:2"},
          {"offsets": [128, 128], "sizes": [172, 172], "placement": "rank:0"}]})",
                            {300, 300}),
                     Scale(R"({"type": "enumerable", "shards": [
          {"offsets": [1, 1], "sizes": [2, 2], "placement": "rank:0"},
          {"offsets": [0, 0], "sizes": [1, 1], "placement": "rank:0"},
          {"offsets": [1, 0], "sizes": [2, 1], "placement": "rank:2"},
          {"offsets": [0, 1], "sizes": [1, 2], "placement": "rank:1"}]})",
                           {3, 3})}),
              IsOkAndHolds(IsEmpty()));
}

TEST(Fp8ScalesTest, MisalignedWeightCutIsRefusedNamingBothAndTheBoundary) {
  EXPECT_THAT(
      Check({Weight(kRows), Scale(kRows)}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "FP8 block scales: layers.0.mlp.weight (F8_E4M3 [300, 256]) is cut at 100 on dim 0, "
               "where its shard 0 (offsets [0, 0], sizes [100, 256], rank:0) ends: not a multiple "
               "of 128, but its scales layers.0.mlp.weight_scale_inv (F32 [3, 2]) hold one scale "
               "per 128×128 block (give the weight's chunk spec \"align\": 128)"));
  // A replicated scale is fine, but the weight's cuts must still be on its blocks.
  EXPECT_THAT(Check({Weight(kRows128), Scale("")}), IsOkAndHolds(IsEmpty()));
  EXPECT_THAT(Check({Weight(kRows), Scale("")}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is cut at 100 on dim 0")));
  // The first bad boundary: the smallest on the lowest dim, whatever the shards' order.
  EXPECT_THAT(Check({Weight(R"({"type": "enumerable", "shards": [
          {"offsets": [200, 0], "sizes": [100, 256], "placement": "rank:0"},
          {"offsets": [0, 0], "sizes": [200, 256], "placement": "rank:1"}]})"),
                     Scale("")}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("is cut at 200 on dim 0, where its shard 0 (offsets [200, 0], "
                                 "sizes [100, 256], rank:0) starts")));
}

TEST(Fp8ScalesTest, ScalesCutElsewhereOrPlacedElsewhereAreRefused) {
  // The scale over two placements: its shard 0 holds block rows 0-1, the weight's shard 0 ends
  // after block row 0.
  EXPECT_THAT(
      Check({Weight(kRows128),
             Scale(R"({"type": "chunk", "dim": 0, "placements": ["rank:0", "rank:1"]})")}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "FP8 block scales: layers.0.mlp.weight_scale_inv (F32 [3, 2]) is not cut like "
               "layers.0.mlp.weight (F8_E4M3 [300, 256]), one scale per 128×128 block: the "
               "weight's shard 0 (offsets [0, 0], sizes [128, 256], rank:0) ends at 128 on dim 0 "
               "(block 1), inside the scale's shard 0 (offsets [0, 0], sizes [2, 2], rank:0) "
               "(shard the scales on the weight's dim with its placements and no align, or "
               "replicate them)"));
  // The weight's shards listed from the bottom up: its shard 0 starts inside the scale's.
  EXPECT_THAT(
      Check({Weight(R"({"type": "enumerable", "shards": [
          {"offsets": [128, 0], "sizes": [172, 256], "placement": "rank:1"},
          {"offsets": [0, 0], "sizes": [128, 256], "placement": "rank:0"}]})"),
             Scale(R"({"type": "chunk", "dim": 0, "placements": ["rank:0", "rank:1"]})")}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("block: the weight's shard 0 (offsets [128, 0], sizes [172, 256], rank:1) "
                         "starts at 128 on dim 0 (block 1), inside the scale's shard 0 (offsets "
                         "[0, 0], sizes [2, 2], rank:0)")));
  // Same blocks, other ranks.
  EXPECT_THAT(
      Check(
          {Weight(kRows128),
           Scale(R"({"type": "chunk", "dim": 0, "placements": ["rank:0", "rank:2", "rank:1"]})")}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr(": the scale's shard 1 (offsets [1, 0], sizes [1, 2], rank:2) is on rank "
                         "2, the weight's shard 1 (offsets [128, 0], sizes [128, 256], rank:1) on "
                         "rank 1 (")));
  // The scale cut on the other dim (columns), the weight on rows.
  EXPECT_THAT(
      Check({Weight(kRows128),
             Scale(R"({"type": "chunk", "dim": 1, "placements": ["rank:0", "rank:1"]})")}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("the weight's shard 0 (offsets [0, 0], sizes [128, 256], rank:0) ends at "
                         "128 on dim 0 (block 1), inside the scale's shard 0 (offsets [0, 0], "
                         "sizes [3, 1], rank:0)")));
  // The weight cut on columns, the scale on rows: the scale is cut where the weight is not.
  EXPECT_THAT(
      Check({Weight(R"({"type": "chunk", "dim": 1, "placements": ["rank:0", "rank:1"]})"),
             Scale(R"({"type": "chunk", "dim": 0, "placements": ["rank:0", "rank:1"]})")}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("the scale's shard 0 (offsets [0, 0], sizes [2, 2], rank:0) ends at block "
                         "2 on dim 0 (index 256 of the weight), inside the weight's shard 0 "
                         "(offsets [0, 0], sizes [300, 128], rank:0)")));
  // A replicated weight needs every scale on every rank.
  EXPECT_THAT(Check({Weight(""), Scale(kRows)}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("the scale's shard 0 (offsets [0, 0], sizes [1, 2], rank:0) ends "
                                 "at block 1 on dim 0 (index 128 of the weight), inside the "
                                 "weight's shard 0 (offsets [0, 0], sizes [300, 256], rank:0)")));
}

TEST(Fp8ScalesTest, AllowMisalignedTurnsErrorsIntoWarnings) {
  const Fp8ScaleOptions allow{.allow_misaligned = true};
  EXPECT_THAT(Check({Weight(kRows), Scale(kRows)}, allow),
              IsOkAndHolds(ElementsAre(
                  AllOf(StartsWith("warning: FP8 block scales: layers.0.mlp.weight (F8_E4M3 [300, "
                                   "256]) is cut at 100 on dim 0"),
                        HasSubstr("; sharded anyway (--allow-misaligned-scales)")))));
  EXPECT_THAT(
      Check({Weight(kRows128),
             Scale(R"({"type": "chunk", "dim": 0, "placements": ["rank:1", "rank:0", "rank:2"]})")},
            allow),
      IsOkAndHolds(ElementsAre(HasSubstr("is on rank 1, the weight's shard 0"))));
}

TEST(Fp8ScalesTest, ScalesOfAnotherShapeAreSkippedWithAWarning) {
  // Block 64 scales [5, 4] checked with B = 128: not checked, even though the cuts are off.
  EXPECT_THAT(Check({Weight(kRows), Scale(kRows, {5, 4})}),
              IsOkAndHolds(ElementsAre(
                  "warning: FP8 block scales: layers.0.mlp.weight_scale_inv (F32 [5, 4]) does not "
                  "have the shape [3, 2] of one scale per 128×128 block of layers.0.mlp.weight "
                  "(F8_E4M3 [300, 256]) (--fp8-block 128): not checked")));
  // With B = 64 they fit, and the weight cut at 100 is refused.
  EXPECT_THAT(Check({Weight(kRows), Scale(kRows, {5, 4})}, {.block = 64}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a multiple of 64")));
  // A per-tensor scale of a replicated weight: nothing is cut, nothing to say.
  EXPECT_THAT(Check({Weight(""), Scale("", {})}), IsOkAndHolds(IsEmpty()));
  EXPECT_THAT(Check({Weight(kRows128), Scale("", {})}), IsOkAndHolds(ElementsAre(HasSubstr("[]"))));
}

TEST(Fp8ScalesTest, WhichTensorsAreChecked) {
  // Not FP8, or no "_scale_inv" companion: not checked.
  EXPECT_THAT(Check({Lay(kWeight, DType::kBFloat16, {300, 256}, kRows), Scale(kRows)}),
              IsOkAndHolds(IsEmpty()));
  EXPECT_THAT(Check({Weight(kRows), Lay("layers.0.mlp.weight_scale", kF32, {3, 2}, kRows)}),
              IsOkAndHolds(IsEmpty()));
  // Every F8_* dtype is.
  for (DType dtype :
       {DType::kFloat8E5M2, DType::kFloat8E8M0, DType::kFloat8E4M3Fnuz, DType::kFloat8E5M2Fnuz}) {
    EXPECT_THAT(Check({Lay(kWeight, dtype, {300, 256}, kRows), Scale(kRows)}),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is cut at 100")));
  }
  // Pairs are checked in the tensors' order; the first failure is the error.
  EXPECT_THAT(Check({Lay("b.weight", kF8, {300, 256}, kRows),
                     Lay("b.weight_scale_inv", kF32, {3, 2}, kRows),
                     Lay("a.weight", kF8, {300, 256}, kRows),
                     Lay("a.weight_scale_inv", kF32, {3, 2}, kRows)}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("b.weight (F8_E4M3")));
}

TEST(Fp8ScalesTest, OtherRanks) {
  // Stacked experts [E, rows, cols]: the leading dim has block 1 and may be cut anywhere, with
  // the scale cut at the same expert.
  const char* experts =
      R"({"type": "chunk", "dim": 0, "placements": ["rank:0", "rank:1", "rank:2"]})";
  EXPECT_THAT(Check({Weight(experts, {4, 256, 300}), Scale(experts, {4, 2, 3})}),
              IsOkAndHolds(IsEmpty()));
  EXPECT_THAT(Check({Weight(experts, {4, 256, 300}), Scale("", {4, 2, 3})}),
              IsOkAndHolds(IsEmpty()));
  EXPECT_THAT(
      Check({Weight(experts, {4, 256, 300}),
             Scale(R"({"type": "chunk", "dim": 0, "placements": ["rank:1", "rank:0", "rank:2"]})",
                   {4, 2, 3})}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is on rank 1, the weight's")));
  EXPECT_THAT(Check({Weight(R"({"type": "chunk", "dim": 2, "placements": ["rank:0", "rank:1"]})",
                            {4, 256, 300}),
                     Scale("", {4, 2, 3})}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is cut at 150 on dim 2")));
  // 1-d: blocks of B along its only dim.
  EXPECT_THAT(Check({Weight(kRows128, {300}), Scale(kRows, {3})}), IsOkAndHolds(IsEmpty()));
  EXPECT_THAT(Check({Weight(kRows, {300}), Scale(kRows, {3})}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("one scale per 128 block")));
}

TEST(Fp8ScalesTest, BlockSizeMustBePositive) {
  EXPECT_THAT(Check({}, {.block = 0}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("the FP8 block size must be >= 1, got 0")));
  // B = 1: every cut is on a block; the scale must be cut exactly like the weight.
  EXPECT_THAT(Check({Weight(kRows), Lay(kScale, kF32, {300, 256}, kRows)}, {.block = 1}),
              IsOkAndHolds(IsEmpty()));
}

}  // namespace
}  // namespace shardkit::checkpoint
