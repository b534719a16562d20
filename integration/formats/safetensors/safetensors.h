// safetensors checkpoints: strict header parsing, reading exactly the bytes needed, atomic writes.
//
// Format: 8-byte little-endian header length N, N bytes of JSON header
//   {"__metadata__": {"k": "v"}, "name": {"dtype": "F32", "shape": [2, 3],
//                                         "data_offsets": [begin, end]}, ...}
// then the data region; offsets are relative to its start.
//
//   SHARDKIT_ASSIGN_OR_RETURN(auto reader, safetensors::Reader::Open("model.safetensors"));
//   for (const auto& info : reader.header().tensors) { ... info.name, info.dtype, info.shape ... }
//   SHARDKIT_ASSIGN_OR_RETURN(Tensor w, reader.ReadTensor("embed.weight"));
//
//   SHARDKIT_RETURN_IF_ERROR(safetensors::WriteFile("out.safetensors", {{"w", &w}}, metadata));
//
// Validation on read (each a kInvalidArgument naming the file and, where it applies, the tensor):
// "not a safetensors file (…)" when the first bytes cannot start one (shorter than an 8-byte
// length and "{}", no '{' after the length, or a length past both the file's end and the limit);
// header length bounds, JSON syntax, duplicate keys, unknown fields, dtype (the sub-byte F4/F6_*
// are rejected by name), shape × element size = byte length without overflow, offsets inside the
// data region, no overlap and no gap between tensors, truncated files.
#ifndef SHARDKIT_INTEGRATION_FORMATS_SAFETENSORS_SAFETENSORS_H_
#define SHARDKIT_INTEGRATION_FORMATS_SAFETENSORS_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/os/files.h"
#include "core/os/opened_file.h"
#include "core/tensor/tensor.h"

namespace shardkit::safetensors {

// Largest header accepted (the safetensors reference implementation's limit).
inline constexpr uint64_t kMaxHeaderBytes = 100 << 20;

struct TensorInfo {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin;  // byte offsets relative to the data region
  uint64_t end;
};

struct Header {
  std::vector<TensorInfo> tensors;  // sorted by begin offset (file order)
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;  // absolute file offset of the data region
};

// Parses and validates a header's JSON text against a data region of `data_size` bytes.
// `source` names the file in messages. Errors: kInvalidArgument.
[[nodiscard]] absl::StatusOr<Header> ParseHeader(std::string_view json, uint64_t data_size,
                                                 std::string_view source);

// Serialises a header for `tensors` (offsets must already be set) with sorted keys, padded with
// spaces to a multiple of 8 bytes as the reference implementation does.
std::string SerializeHeader(const std::vector<TensorInfo>& tensors,
                            const std::map<std::string, std::string>& metadata);

// What precedes a file's data region: the 8-byte little-endian length of SerializeHeader's text,
// then that text.
std::string SerializePrefix(const std::vector<TensorInfo>& tensors,
                            const std::map<std::string, std::string>& metadata);

// The layout of a file about to be written: its tensors in name order with their offsets, and
// the bytes before the data region (the 8-byte header length and the header). Writers that place
// bytes at their final offsets (the streaming checkpoint paths) write `prefix`, then each tensor's
// bytes at prefix.size() + begin.
struct FileLayout {
  std::vector<TensorInfo> tensors;
  std::string prefix;
  uint64_t data_size = 0;
};

// Lays out `tensors` (only name, dtype and shape are used). `path` names the file in messages.
// Errors: kInvalidArgument for duplicate or reserved names or a shape too large.
[[nodiscard]] absl::StatusOr<FileLayout> PlanFile(
    const std::string& path, std::vector<TensorInfo> tensors,
    const std::map<std::string, std::string>& metadata = {});

// Reads a file's header once; tensor data is read on demand with pread into exactly the bytes of
// the requested tensor (the file is never loaded whole). Movable, not copyable.
// What identifies a file's contents cheaply: its size and the SHA-256 of its header bytes (the
// 8-byte length and the JSON), as ranks compare them before each reads its own part of a file.
struct FileIdentity {
  uint64_t size = 0;
  std::string header_digest;  // "sha256:<hex>" (specs/fingerprint.h)
};

class Reader {
 public:
  // Errors: kNotFound if the file does not exist; kInvalidArgument for malformed content.
  [[nodiscard]] static absl::StatusOr<Reader> Open(const std::string& path);

  Reader(Reader&& other) noexcept = default;
  Reader& operator=(Reader&& other) noexcept = default;

  const Header& header() const { return header_; }
  const std::string& path() const { return file_.path(); }
  // The open file (for copies inside the kernel: os::AtomicFile::CopyFrom).
  int fd() const { return file_.fd(); }
  // As the file was when opened.
  const FileIdentity& identity() const { return identity_; }

  // Whether the file is still the one opened: the same size, and the same file at its path (not
  // replaced by another). Errors: kInvalidArgument naming the path and what changed.
  [[nodiscard]] absl::Status CheckUnchanged() const;

  // Errors: kNotFound naming the tensor.
  [[nodiscard]] absl::StatusOr<const TensorInfo*> Find(std::string_view name) const;

  // A fresh CPU tensor holding the tensor's bytes. Errors: kNotFound; kUnavailable on I/O errors.
  [[nodiscard]] absl::StatusOr<Tensor> ReadTensor(std::string_view name) const;

  // Reads bytes [offset, offset + size) of a tensor's data into `dst`.
  [[nodiscard]] absl::Status ReadBytes(const TensorInfo& info, uint64_t offset, uint64_t size,
                                       void* dst) const;

 private:
  Reader() = default;

  os::OpenedFile file_;  // the file, and what tells a replacement or a resize
  Header header_;
  absl::flat_hash_map<std::string, size_t> by_name_;  // index into header_.tensors
  FileIdentity identity_;
};

// Writes a safetensors file tensor by tensor, so that a large output never has to be in memory
// at once; the file appears atomically on Commit(). Tensors are laid out in name order and must be
// appended in that order (tensors()).
//
//   SHARDKIT_ASSIGN_OR_RETURN(Writer writer, Writer::Create(path, infos, metadata));
//   for (const TensorInfo& info : writer.tensors()) {
//     SHARDKIT_RETURN_IF_ERROR(writer.Append(BuildTensor(info)));
//   }
//   SHARDKIT_RETURN_IF_ERROR(writer.Commit());
//
// Movable, not copyable; destroying it without Commit() leaves no file.
class Writer {
 public:
  // Writes the header for `tensors` (only name, dtype and shape are used; offsets are assigned).
  // Errors: kInvalidArgument for duplicate or reserved names, a shape too large, or a path that
  // cannot be written (naming the path and the OS error); kUnavailable for I/O errors.
  [[nodiscard]] static absl::StatusOr<Writer> Create(
      const std::string& path, std::vector<TensorInfo> tensors,
      const std::map<std::string, std::string>& metadata = {});

  // The tensors in file (name) order, with their offsets.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }

  // Appends the data of tensors()[k] for the k-th call (any strides; packed once if needed).
  // Errors: kFailedPrecondition if its dtype or shape differs or every tensor was written;
  // kUnavailable for I/O errors.
  [[nodiscard]] absl::Status Append(const Tensor& tensor);

  // Errors: kFailedPrecondition if tensors are missing; as os::AtomicFile::Commit.
  [[nodiscard]] absl::Status Commit();

 private:
  Writer(os::AtomicFile file, std::vector<TensorInfo> tensors);

  os::AtomicFile file_;
  std::vector<TensorInfo> tensors_;
  size_t next_ = 0;
};

// Writes a safetensors file atomically (a temporary name in the same directory, then rename).
// Tensors are laid out in name order; non-contiguous tensors are packed once. Names must be unique.
// Errors: kInvalidArgument for duplicate names, meta tensors, or a path that cannot be written
// (naming the path and the OS error); kUnavailable for I/O errors while writing.
[[nodiscard]] absl::Status WriteFile(
    const std::string& path, const std::vector<std::pair<std::string, const Tensor*>>& tensors,
    const std::map<std::string, std::string>& metadata = {});

}  // namespace shardkit::safetensors

#endif  // SHARDKIT_INTEGRATION_FORMATS_SAFETENSORS_SAFETENSORS_H_
