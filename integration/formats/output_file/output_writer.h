// OutputWriter: one output format as the checkpoint writers (`shard`, `reshard`, SaveShards,
// `gather`) use it — its directory rules (OutputKind, output_kind.h) and its files: every rank
// creates its own sink at its final size (CreateRankFile: one file, or a format's several), the
// caller writes every tensor's bytes at the offsets it gives and commits the sink, then the source
// rank writes the last file (WriteLastFile: index.json, DCP's `.metadata`, a Hugging Face
// checkpoint's index), which is the commit of the output. A shard directory
// (formats/shard_dir/shard_dir_output.h), a PyTorch DCP checkpoint (formats/dcp/dcp_output.h) and
// a Hugging Face checkpoint (formats/hf/hf_writer.h: one process, files written in order)
// implement it; integration/checkpoint/output_format.h picks one by `--format`, so that the
// writers never ask which format they write.
//
//   const formats::OutputWriter& writer = OutputWriterOf(format);
//   formats::OutputContent content{world, src_rank, tensors, "save", &metadata, &items};
//   formats::RankFile file;
//   SHARDKIT_RETURN_IF_ERROR(writer.CreateRankFile(dir, rank, content, file));
//   ... file.sink->WriteAt(file.data_start + file.dest[t][s] + k, ...) ...; file.sink->Commit();
//   if (rank == src_rank) SHARDKIT_RETURN_IF_ERROR(writer.WriteLastFile(dir, content));
#ifndef SHARDKIT_INTEGRATION_FORMATS_OUTPUT_FILE_OUTPUT_WRITER_H_
#define SHARDKIT_INTEGRATION_FORMATS_OUTPUT_FILE_OUTPUT_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "core/tensor/dtype.h"
#include "core/tensor/shape.h"
#include "integration/formats/output_file/output_kind.h"
#include "integration/formats/output_file/rank_sink.h"
#include "specs/shard_metadata.h"

namespace shardkit::formats {

// One tensor of an output with its agreed layout.
struct OutputTensor {
  std::string name;
  DType dtype = DType::kFloat32;
  Shape shape;
  bool replicated = false;
  std::vector<specs::ShardMetadata>
      shards;             // sharded: the layout in spec order (replicated: unused)
  std::string spec_json;  // the bound spec's canonical JSON, or specs::kReplicatedJson
};

// The tensors of an output, in the order the writer streams them, viewed where they lie: a
// vector of OutputTensor or of a type derived from it (the stream's StreamTensor).
class OutputTensors {
 public:
  OutputTensors() = default;
  template <typename T>
  OutputTensors(const std::vector<T>& tensors)  // NOLINT(google-explicit-constructor): a view
      : data_(tensors.data()), size_(tensors.size()), at_(&At<T>) {}

  size_t size() const { return size_; }
  const OutputTensor& operator[](size_t i) const { return at_(data_, i); }

 private:
  template <typename T>
  static const OutputTensor& At(const void* data, size_t i) {
    return static_cast<const T*>(data)[i];
  }

  const void* data_ = nullptr;
  size_t size_ = 0;
  const OutputTensor& (*at_)(const void*, size_t) = nullptr;
};

// A step of a key's path in a nested state dict: a dict key or a list index.
using PathStep = std::variant<std::string, int64_t>;

// What an output carries besides tensors (a format that holds them: OutputWriter::holds_items):
// non-tensor items by key, their bytes as they are (a torch.save archive of a Python object that
// nothing here reads); and each key's path in the nested state dict where known.
struct OutputItems {
  std::map<std::string, std::string> bytes;
  std::map<std::string, std::vector<PathStep>> paths;
};

// What the ranks of one run write together; the same on every rank.
struct OutputContent {
  int world_size = 1;
  int src_rank = 0;       // writes the last file (and DCP's replicated tensors and items)
  OutputTensors tensors;  // the stream's order
  // How the data came to the files, as a shard directory's index.json records it ("scatter",
  // "broadcast", "direct", "reshard", "save").
  std::string_view written_by;
  const std::map<std::string, std::string>* metadata = nullptr;  // the checkpoint's __metadata__
  const OutputItems* items = nullptr;  // on src_rank, where the format holds them; else empty
};

// A rank's file (or files), as CreateRankFile leaves it: a sink at its final size under temporary
// names (the caller commits it; destroying it uncommitted removes them), everything but the
// tensors' bytes written. Shard s of tensors[t] (s = 0: a replicated tensor) goes to byte
// data_start + dest[t][s] of the sink's region; dest is -1 for what this rank's file does not hold.
struct RankFile {
  std::unique_ptr<RankSink> sink;
  int64_t data_start = 0;
  std::vector<std::vector<int64_t>> dest;
};

class OutputWriter : public OutputKind {
 public:
  // `--format`'s word for it ("shardkit", "dcp") and what its output is ("a shard directory").
  virtual std::string_view format_name() const = 0;
  virtual std::string_view description() const = 0;
  // Whether its output holds non-tensor items (OutputContent::items).
  virtual bool holds_items() const { return false; }

  // Rank `rank`'s file name in the directory.
  virtual std::string RankFileName(int rank) const = 0;

  // The names of every file rank `rank`'s sink writes, in order: RankFileName(rank) unless the
  // format writes several (a Hugging Face checkpoint: as many as its tensors fill).
  virtual std::vector<std::string> RankFileNames(int rank, const OutputContent& content) const {
    return {RankFileName(rank)};
  }

  // Creates rank `rank`'s file in `dir` (see RankFile). Errors: kInvalidArgument for a tensor the
  // format cannot hold (naming it); the OS error naming the file.
  [[nodiscard]] virtual absl::Status CreateRankFile(const std::string& dir, int rank,
                                                    const OutputContent& content,
                                                    RankFile& file) const = 0;

  // How many tensors (shards, whole tensors) each rank's file holds, by rank.
  virtual std::vector<int64_t> RankFileTensors(const OutputContent& content) const = 0;

  // The source rank, after every rank committed its file: writes last_file_name() into `dir`,
  // atomically. Errors: as CreateRankFile; the OS error naming the file.
  [[nodiscard]] virtual absl::Status WriteLastFile(const std::string& dir,
                                                   const OutputContent& content) const = 0;
};

}  // namespace shardkit::formats

#endif  // SHARDKIT_INTEGRATION_FORMATS_OUTPUT_FILE_OUTPUT_WRITER_H_
