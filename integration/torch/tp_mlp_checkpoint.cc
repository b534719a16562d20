#include "integration/torch/tp_mlp_checkpoint.h"

#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "integration/formats/safetensors/safetensors.h"

namespace shardkit::tp_mlp {
namespace {

absl::StatusOr<Tensor> ReadMatrix(const safetensors::Reader& reader, const std::string& name) {
  absl::StatusOr<const safetensors::TensorInfo*> info = reader.Find(name);
  if (!info.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(reader.path(), ": tensor \"", name, "\" is missing"));
  }
  if ((*info)->dtype != DType::kFloat32 || (*info)->shape.size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        reader.path(), ": tensor \"", name, "\" is ", std::string(SafetensorsName((*info)->dtype)),
        ShapeToString((*info)->shape), ", expected a 2-D F32 tensor"));
  }
  return reader.ReadTensor(name);
}

absl::Status CheckShapes(const std::string& path, const MlpData& d) {
  const Shape &f1 = d.fc1.shape(), &f2 = d.fc2.shape(), &x = d.x.shape(), &y = d.y.shape();
  if (f2[1] == f1[0] && x[1] == f1[1] && y[0] == x[0] && y[1] == f2[0]) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": inconsistent shapes: fc1.weight ", ShapeToString(f1), ", fc2.weight ",
                   ShapeToString(f2), ", x ", ShapeToString(x), ", y ", ShapeToString(y),
                   " (expected [H, D], [O, H], [B, D], [B, O])"));
}

}  // namespace

absl::StatusOr<MlpData> ReadMlpCheckpoint(const std::string& path) {
  SHARDKIT_ASSIGN_OR_RETURN(safetensors::Reader reader, safetensors::Reader::Open(path));
  MlpData d;
  SHARDKIT_ASSIGN_OR_RETURN(d.fc1, ReadMatrix(reader, "fc1.weight"));
  SHARDKIT_ASSIGN_OR_RETURN(d.fc2, ReadMatrix(reader, "fc2.weight"));
  SHARDKIT_ASSIGN_OR_RETURN(d.x, ReadMatrix(reader, "x"));
  SHARDKIT_ASSIGN_OR_RETURN(d.y, ReadMatrix(reader, "y"));
  SHARDKIT_RETURN_IF_ERROR(CheckShapes(path, d));
  d.dims = {.hidden = d.fc1.shape()[0],
            .in = d.fc1.shape()[1],
            .out = d.fc2.shape()[0],
            .batch = d.x.shape()[0]};
  return d;
}

absl::Status WriteMlpWeights(const std::string& path, const Tensor& fc1, const Tensor& fc2) {
  return safetensors::WriteFile(path, {{"fc1.weight", &fc1}, {"fc2.weight", &fc2}});
}

flags::ParseResult ParseTrainFlags(const std::string& command, const std::vector<std::string>& args,
                                   bool save_shards_flag, TrainFlags* flags) {
  flags::FlagParser parser(command, absl::StrCat("--checkpoint IN.safetensors --steps N --lr LR "
                                                 "--out OUT.safetensors",
                                                 save_shards_flag ? " [--save-shards DIR]" : ""));
  parser.AddString("checkpoint", &flags->checkpoint,
                   "F32 fc1.weight [H, D], fc2.weight [O, H], x [B, D], y [B, O] (required)");
  parser.AddInt("steps", &flags->steps, "SGD steps (required)", 0, int64_t{1} << 30);
  parser.AddDouble("lr", &flags->lr, "learning rate (required)");
  parser.AddString("out", &flags->out, "where the trained weights go (required)");
  if (save_shards_flag) {
    parser.AddString("save-shards", &flags->save_shards, "also save every rank's shards in DIR");
  }
  flags::ParseResult parsed = ParseCommand(parser, args, flags::Positionals::None());
  if (parsed.done()) return parsed;
  absl::Status required =
      flags::Require(parser, {"checkpoint", "steps", "lr", "out"}, flags::kSeeHelp);
  if (required.ok()) return parsed;
  flags::ReportError(command, required);
  return flags::ParseResult(flags::ParseResult::Outcome::kError, required, {});
}

}  // namespace shardkit::tp_mlp
