// HfOutput: a Hugging Face checkpoint (hf_output.h's layout) as a formats::OutputWriter, written
// by one process (`shardkit gather --max-shard-size`, GatherHuggingFace) with its files in order.
// CreateRankFile plans the files by AssignFiles over the tensors in the order given (which must be
// name order: gather's), each file with the checkpoint's __metadata__, and returns their sink — a
// safetensors::OutputFiles over the files' data regions back to back: the first file created at
// once, the next ones as the writes reach them, committed in order. WriteLastFile writes
// model.safetensors.index.json, the commit of the output, unless one file holds everything
// (model.safetensors alone, committed by the sink).
//
//   const hf::HfOutput writer(max_file_bytes);
//   formats::OutputContent content{.world_size = 1, .tensors = tensors, .metadata = &metadata};
//   formats::RankFile file;                          // file.dest[t][0]: tensor t's virtual offset
//   SHARDKIT_RETURN_IF_ERROR(writer.CreateRankFile(dir, 0, content, file));
//   ... file.sink->WriteAt(offset, ...) in order ...; file.sink->Commit();
//   SHARDKIT_RETURN_IF_ERROR(writer.WriteLastFile(dir, content));
//
// Its directory rule is Hugging Face's: the output goes into an empty directory
// (LockEmptyDirectory, which leaves a model folder's other files alone), never over an earlier
// one, so Examine refuses a directory that holds any of its files.
#ifndef SHARDKIT_INTEGRATION_FORMATS_HF_HF_WRITER_H_
#define SHARDKIT_INTEGRATION_FORMATS_HF_HF_WRITER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "integration/formats/hf/hf_output.h"
#include "integration/formats/output_file/output_writer.h"

namespace shardkit::hf {

class HfOutput final : public formats::OutputWriter {
 public:
  // At most `max_file_bytes` (> 0) of tensor data per file, unless one tensor alone is larger.
  explicit HfOutput(int64_t max_file_bytes) : max_file_bytes_(max_file_bytes) {}

  std::string_view format_name() const override { return "hf"; }
  std::string_view description() const override { return "a Hugging Face checkpoint"; }

  // IsHfOutputName.
  bool IsOutputFile(std::string_view name) const override;
  // Never a complete output to replace: kInvalidArgument naming `dir` and the first names when
  // there are any; false when there are none.
  absl::StatusOr<bool> Examine(const std::string& dir,
                               const std::vector<std::string>& names) const override;
  // model.safetensors.index.json (a checkpoint of one file has none: model.safetensors is then
  // committed last, by the sink).
  std::string_view last_file_name() const override { return kHfIndexFileName; }

  // model.safetensors: the name of a checkpoint of one file (RankFileNames names them all).
  std::string RankFileName(int rank) const override { return kHfSingleFileName; }
  // The files the checkpoint of `content` has, in order (HfFileNames of AssignFiles' count);
  // {model.safetensors} when a tensor's size overflows (which CreateRankFile refuses).
  std::vector<std::string> RankFileNames(int rank,
                                         const formats::OutputContent& content) const override;

  // Rank 0 of a world of one: the files' sink (data_start 0; dest[t][0] is tensor t's offset in
  // the files' data regions back to back). Errors: kInvalidArgument for a world of more than one
  // process, a sharded tensor (naming it), tensors not in name order (naming the two), a tensor
  // whose size overflows; as safetensors::PlanFile and os::AtomicFile, naming the file.
  absl::Status CreateRankFile(const std::string& dir, int rank,
                              const formats::OutputContent& content,
                              formats::RankFile& file) const override;

  // {every tensor}: one process writes them all.
  std::vector<int64_t> RankFileTensors(const formats::OutputContent& content) const override;

  // model.safetensors.index.json ({"total_size": the data bytes}, every tensor's file), written
  // atomically; nothing for a checkpoint of one file. Errors: as os::WriteFileAtomically.
  absl::Status WriteLastFile(const std::string& dir,
                             const formats::OutputContent& content) const override;

 private:
  int64_t max_file_bytes_;
};

}  // namespace shardkit::hf

#endif  // SHARDKIT_INTEGRATION_FORMATS_HF_HF_WRITER_H_
