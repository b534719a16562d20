// RankSink: where one rank's output bytes go, addressed as one byte region: a single file
// (FileSink, an os::AtomicFile: a shard directory's rank file, a DCP `.distcp` file) or several
// files in order (safetensors::OutputFiles: a Hugging Face checkpoint's files). An OutputWriter
// (output_writer.h) creates it at its final size; the caller writes every tensor's bytes at the
// offsets the writer gave, then commits it. Destroying a sink that was not committed removes its
// temporary files.
//
//   std::unique_ptr<formats::RankSink> sink = ...;           // from OutputWriter::CreateRankFile
//   SHARDKIT_RETURN_IF_ERROR(sink->WriteAt(offset, data, size));
//   sink->StartWriteback(offset, size);
//   SHARDKIT_RETURN_IF_ERROR(sink->Commit());                 // durable, under its final names
//
// Not thread-safe unless a sink says otherwise (FileSink: WriteAt, CopyFrom and StartWriteback of
// disjoint ranges may run concurrently, as os::AtomicFile's).
#ifndef SHARDKIT_INTEGRATION_FORMATS_OUTPUT_FILE_RANK_SINK_H_
#define SHARDKIT_INTEGRATION_FORMATS_OUTPUT_FILE_RANK_SINK_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "core/os/files.h"

namespace shardkit::formats {

class RankSink {
 public:
  virtual ~RankSink() = default;

  // Whether writes must come in order, each starting where the last ended (a sink of several
  // files creates and commits them as the writes reach them); else any order, any range.
  virtual bool writes_in_order() const { return false; }

  // Writes `size` bytes at byte `offset` of the region. Errors: as os::AtomicFile::WriteAt;
  // kFailedPrecondition for a write out of order where writes_in_order().
  [[nodiscard]] virtual absl::Status WriteAt(uint64_t offset, const void* data, size_t size) = 0;

  // Writes `size` bytes of file `in` (from `in_offset`; `in_name` names it in messages) at byte
  // `offset`. Errors: as os::AtomicFile::CopyFrom; as WriteAt.
  [[nodiscard]] virtual absl::Status CopyFrom(int in, const std::string& in_name,
                                              uint64_t in_offset, uint64_t offset, size_t size) = 0;

  // Asks the kernel to start writing bytes [offset, offset + size) to disk (a hint).
  virtual void StartWriteback(uint64_t offset, uint64_t size) {}

  // Makes every file durable and puts it in place (os::AtomicFile::Commit), in order. Call once,
  // after every byte is written. Errors: as os::AtomicFile::Commit.
  [[nodiscard]] virtual absl::Status Commit() = 0;

  // A failed run cleaning up after itself, where its output went into a directory that held none
  // of it (a Hugging Face checkpoint): removes the files already committed too. Best effort. The
  // default removes nothing more than destroying the sink does.
  virtual void RemoveCommitted() {}
};

// One file: an os::AtomicFile, its region the whole file.
class FileSink final : public RankSink {
 public:
  explicit FileSink(os::AtomicFile file) : file_(std::move(file)) {}

  absl::Status WriteAt(uint64_t offset, const void* data, size_t size) override {
    return file_.WriteAt(offset, data, size);
  }
  absl::Status CopyFrom(int in, const std::string& in_name, uint64_t in_offset, uint64_t offset,
                        size_t size) override {
    return file_.CopyFrom(in, in_name, in_offset, offset, size);
  }
  void StartWriteback(uint64_t offset, uint64_t size) override {
    file_.StartWriteback(offset, size);
  }
  absl::Status Commit() override { return file_.Commit(); }

 private:
  os::AtomicFile file_;
};

}  // namespace shardkit::formats

#endif  // SHARDKIT_INTEGRATION_FORMATS_OUTPUT_FILE_RANK_SINK_H_
