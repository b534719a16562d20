#include "integration/demo/synthetic_model.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/status_macros.h"
#include "core/tensor/dtype.h"

namespace shardkit::demo {
namespace {

constexpr int64_t kValueStride = 1000;  // ExpectedParameter: parameter i starts at 1000 · i

// The chunk rules of the plan: rows for embeddings and the up-projections, columns for the
// down-projections ("dim": -1 counts from the end, as in PyTorch).
constexpr char kChunkRules[] = R"(
  {"match": "embed.weight", "spec": {"type": "chunk", "dim": 0, "placements": {"ranks": "all"}}},
  {"match": "layers.*.attn.qkv.*", "spec": {"type": "chunk", "dim": 0, "placements": {"ranks": "all"}}},
  {"match": "layers.*.attn.out.weight", "spec": {"type": "chunk", "dim": 1, "placements": {"ranks": "all"}}},
  {"match": "layers.*.mlp.up.*", "spec": {"type": "chunk", "dim": 0, "placements": {"ranks": "all"}}},
  {"match": "layers.*.mlp.down.weight", "spec": {"type": "chunk", "dim": -1, "placements": {"ranks": "all"}}},)";

// head.weight [rows, cols] as a 2×2 grid of blocks, block k on rank k % world_size.
std::string HeadGridRule(int64_t rows, int64_t cols, int world_size) {
  const int64_t top = rows / 2, left = cols / 2;
  const int64_t offsets[4][2] = {{0, 0}, {0, left}, {top, 0}, {top, left}};
  const int64_t sizes[4][2] = {
      {top, left}, {top, cols - left}, {rows - top, left}, {rows - top, cols - left}};
  std::string shards;
  for (int k = 0; k < 4; ++k) {
    absl::StrAppendFormat(&shards,
                          R"(%s{"offsets": [%d, %d], "sizes": [%d, %d], "placement": "rank:%d"})",
                          k == 0 ? "" : ",\n      ", offsets[k][0], offsets[k][1], sizes[k][0],
                          sizes[k][1], k % world_size);
  }
  return absl::StrCat(R"(
  {"match": "head.weight", "spec": {"type": "enumerable", "shards": [
      )",
                      shards, "]}}");
}

}  // namespace

std::vector<specs::ParameterInfo> SyntheticParameters(const SyntheticModelConfig& config) {
  const int64_t h = config.hidden;
  std::vector<specs::ParameterInfo> params = {{"embed.weight", {config.vocab, h}},
                                              {"pos_embed.weight", {config.positions, h}}};
  for (int64_t layer = 0; layer < config.layers; ++layer) {
    const std::string prefix = absl::StrCat("layers.", layer, ".");
    for (specs::ParameterInfo param : std::vector<specs::ParameterInfo>{
             {"attn.norm.weight", {h}},
             {"attn.qkv.weight", {3 * h, h}},
             {"attn.qkv.bias", {3 * h}},
             {"attn.out.weight", {h, h}},
             {"mlp.norm.weight", {h}},
             {"mlp.up.weight", {4 * h, h}},
             {"mlp.up.bias", {4 * h}},
             {"mlp.down.weight", {h, 4 * h}},
         }) {
      params.push_back({prefix + param.name, std::move(param.shape)});
    }
  }
  params.push_back({"norm.weight", {h}});
  params.push_back({"norm.bias", {h}});
  params.push_back({"head.weight", {config.vocab, h}});
  return params;
}

int64_t SyntheticModelBytes(const SyntheticModelConfig& config) {
  int64_t bytes = 0;
  for (const specs::ParameterInfo& param : SyntheticParameters(config)) {
    absl::StatusOr<ShapeSize> size = ComputeShapeSize(param.shape, DType::kFloat32);
    if (size.ok()) bytes += size->nbytes;
  }
  return bytes;
}

absl::StatusOr<Tensor> ExpectedParameter(const specs::ParameterInfo& parameter, size_t index) {
  return Tensor::Arange(parameter.shape, DType::kFloat32,
                        kValueStride * static_cast<int64_t>(index));
}

absl::StatusOr<Module> BuildSyntheticModel(const SyntheticModelConfig& config, bool materialize,
                                           const Device& device) {
  Module module;
  const std::vector<specs::ParameterInfo> params = SyntheticParameters(config);
  for (size_t i = 0; i < params.size(); ++i) {
    SHARDKIT_ASSIGN_OR_RETURN(Tensor tensor, materialize
                                                 ? ExpectedParameter(params[i], i)
                                                 : Tensor::Meta(params[i].shape, DType::kFloat32));
    if (materialize && device != Device::Cpu()) {
      SHARDKIT_ASSIGN_OR_RETURN(tensor, tensor.Clone(device));
    }
    SHARDKIT_RETURN_IF_ERROR(module.AddParameter(params[i].name, std::move(tensor)));
  }
  return module;
}

std::string DemoPlanJson(const SyntheticModelConfig& config, int world_size) {
  return absl::StrCat(R"({"version": 1, "src_rank": 0, "strategy": "scatter", "rules": [)",
                      kChunkRules, HeadGridRule(config.vocab, config.hidden, world_size), "]}\n");
}

}  // namespace shardkit::demo
