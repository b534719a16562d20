#include "integration/checkpoint/source/dcp_source.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <span>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/quote.h"
#include "core/base/status_macros.h"
#include "core/os/fd.h"
#include "core/tensor/dtype.h"
#include "integration/checkpoint/stream/stream_buffer.h"
#include "integration/formats/torch_zip/torch_zip.h"

namespace shardkit::checkpoint {
namespace {

namespace fs = std::filesystem;

std::string ShapeText(const Shape& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// How messages name a chunk: its key, its box and its item.
std::string ChunkText(const dcp::TensorEntry& tensor, const dcp::Chunk& chunk) {
  return absl::StrCat(QuoteName(tensor.fqn), " chunk at offsets ", ShapeText(chunk.offsets),
                      " (item ", chunk.item.file, " bytes [", chunk.item.offset, ", ",
                      chunk.item.offset + chunk.item.length, "))");
}

}  // namespace

absl::StatusOr<std::unique_ptr<DcpSource>> DcpSource::Open(const std::string& dir,
                                                           int64_t staging_bytes) {
  std::unique_ptr<DcpSource> source(new DcpSource());
  source->dir_ = dir;
  SHARDKIT_ASSIGN_OR_RETURN(source->metadata_, dcp::ReadMetadata(dir));
  uint64_t metadata_bytes = 0;
  for (const std::string& name : source->metadata_.files) {
    std::error_code ec;
    metadata_bytes += fs::file_size(fs::path(dir) / name, ec);
  }
  source->identity_.push_back({absl::StrJoin(source->metadata_.files, "+"), metadata_bytes,
                               source->metadata_.digest, /*whole=*/true});
  SHARDKIT_RETURN_IF_ERROR(source->IndexTensors(dir));
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<std::shared_ptr<Storage>> staging,
                            AllocateBuffers(1, staging_bytes));
  source->staging_ = std::move(staging[0]);
  source->reader_ = std::make_unique<TensorBytesReader>(
      std::span<std::byte>(source->staging_->data(), source->staging_->nbytes()));
  source->touched_.assign(source->files_.size(), false);
  return source;
}

// The file `name` of the directory, opened on first use.
absl::StatusOr<size_t> DcpSource::FileOf(const std::string& dir, const std::string& name) {
  if (auto it = file_index_.find(name); it != file_index_.end()) return it->second;
  SHARDKIT_ASSIGN_OR_RETURN(os::OpenedFile file,
                            os::OpenedFile::Open((fs::path(dir) / name).string()));
  identity_.push_back({name, file.size(), ""});
  files_.push_back(std::move(file));
  file_index_.emplace(name, files_.size() - 1);
  return files_.size() - 1;
}

// The zip record of `chunk` in its file (`*f`: the file's index), checked to hold the chunk's dtype
// and shape. A record that is not there, or not what the metadata says, is blamed on the metadata:
// the usual cause is a metadata file copied from another checkpoint.
absl::StatusOr<torch_zip::TensorRecord> DcpSource::RecordOf(const std::string& dir,
                                                            const dcp::TensorEntry& entry,
                                                            const dcp::Chunk& chunk, size_t* f) {
  const auto blame = [&](const absl::Status& status) {
    return absl::Status(
        status.code(),
        absl::StrCat(dir, ": its metadata (", absl::StrJoin(metadata_.files, ", "),
                     ") does not describe the files beside it (is it another checkpoint's, or "
                     "was a file replaced since the save?): ",
                     status.message()));
  };
  absl::StatusOr<size_t> file = FileOf(dir, chunk.item.file);
  if (!file.ok()) return blame(file.status());
  *f = *file;
  const os::OpenedFile& opened = files_[*f];
  absl::StatusOr<torch_zip::TensorRecord> record = torch_zip::ReadTensorRecord(
      opened.fd(), opened.size(), chunk.item.offset, chunk.item.length, opened.path());
  if (!record.ok()) return blame(record.status());
  if (record->dtype != entry.dtype || record->shape != chunk.sizes) {
    return blame(absl::InvalidArgumentError(absl::StrCat(
        ChunkText(entry, chunk), ": the metadata says ", std::string(DTypeName(entry.dtype)), " ",
        ShapeText(chunk.sizes), ", the item holds ", std::string(DTypeName(record->dtype)), " ",
        ShapeText(record->shape))));
  }
  return record;
}

// Every tensor over one virtual data region (key order), each chunk's values found in its zip
// record, the chunks indexed by box.
absl::Status DcpSource::IndexTensors(const std::string& dir) {
  // torch's tensors: what safetensors' own torch loaders expect (safe_open refuses a file without
  // it in older versions), written into every safetensors file made from this checkpoint.
  header_.metadata["format"] = "pt";
  uint64_t offset = 0;
  for (const dcp::TensorEntry& entry : metadata_.tensors) {
    SHARDKIT_ASSIGN_OR_RETURN(const ShapeSize size, ComputeShapeSize(entry.shape, entry.dtype));
    const uint64_t begin = offset;
    offset += static_cast<uint64_t>(size.nbytes);
    header_.tensors.push_back({entry.fqn, entry.dtype, entry.shape, begin, offset});
    Tensor& tensor = tensors_.emplace_back();
    std::vector<specs::ShardMetadata> boxes;
    std::set<size_t> files;
    for (const dcp::Chunk& chunk : entry.chunks) {
      size_t f = 0;
      SHARDKIT_ASSIGN_OR_RETURN(const torch_zip::TensorRecord record,
                                RecordOf(dir, entry, chunk, &f));
      ChunkBytes& at = tensor.at.emplace_back();
      at.file = f;
      at.data_offset = record.data_offset;
      at.bytes = static_cast<int64_t>(record.data_length);
      if (!record.row_major) {
        if (ElementBits(entry.dtype) % 8 != 0) {
          return absl::InvalidArgumentError(
              absl::StrCat(ChunkText(entry, chunk), ": a sub-byte dtype saved with strides ",
                           ShapeText(record.strides), ", not row-major: shardkit cannot read it"));
        }
        SHARDKIT_ASSIGN_OR_RETURN(const ShapeSize chunk_size,
                                  ComputeShapeSize(chunk.sizes, entry.dtype));
        at.bytes = chunk_size.nbytes;
        at.sizes = chunk.sizes;
        at.strides = record.strides;
        at.element_bytes = ElementBits(entry.dtype) / 8;
      }
      files.insert(f);
      boxes.push_back({chunk.offsets, chunk.sizes, specs::Placement::ForRank(0)});
    }
    tensor.files.assign(files.begin(), files.end());
    SHARDKIT_ASSIGN_OR_RETURN(tensor.stored, MakeStoredTensor(entry.fqn, entry.dtype, entry.shape,
                                                              begin, offset, std::move(boxes)));
  }
  return absl::OkStatus();
}

std::vector<std::string> DcpSource::skipped() const {
  std::vector<std::string> keys;
  for (const dcp::BytesEntry& entry : metadata_.bytes) keys.push_back(entry.fqn);
  return keys;
}

std::string DcpSource::SkippedWarning(
    absl::FunctionRef<bool(const std::string& key)> counted) const {
  std::vector<std::string> keys = skipped();
  keys.erase(std::remove_if(keys.begin(), keys.end(),
                            [&](const std::string& key) { return !counted(key); }),
             keys.end());
  if (keys.empty()) return "";
  return absl::StrCat("warning: ", dir_, ": ", keys.size(),
                      keys.size() == 1 ? " non-tensor item is" : " non-tensor items are",
                      " not read (shardkit moves tensors only): ", JoinFirst(keys, 8));
}

absl::StatusOr<std::map<std::string, std::string>> DcpSource::ReadItems(
    absl::FunctionRef<bool(const std::string& key)> keep) const {
  std::map<std::string, std::string> items;
  for (const dcp::BytesEntry& entry : metadata_.bytes) {
    if (!keep(entry.fqn)) continue;
    const std::string what =
        absl::StrCat("non-tensor item ", QuoteName(entry.fqn), " (", entry.item.file, " bytes [",
                     entry.item.offset, ", ", entry.item.offset + entry.item.length, "))");
    if (entry.item.length > kMaxItemBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(dir_, ": ", what, " is larger than ", kMaxItemBytes, " bytes"));
    }
    const std::string path = (fs::path(dir_) / entry.item.file).string();
    const os::Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) {
      const int err = errno;
      const std::string text =
          absl::StrCat(path, ": cannot open (", what, "): ", os::ErrnoText(err));
      return err == ENOENT ? absl::NotFoundError(text) : absl::UnavailableError(text);
    }
    std::string& bytes = items[entry.fqn];
    bytes.resize(entry.item.length);
    const int err = os::PreadFully(fd.get(), bytes.data(), bytes.size(), entry.item.offset);
    if (err == os::kNoBytes) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", what, " lies beyond its end"));
    }
    if (err != 0) {
      return absl::UnavailableError(
          absl::StrCat(path, ": cannot read ", what, ": ", os::ErrnoText(err)));
    }
  }
  return items;
}

absl::Status DcpSource::ReadBytes(size_t t, int64_t offset, int64_t size, std::byte* dst) const {
  const Tensor& tensor = tensors_[t];
  return ReadFromBoxes(tensor.stored, offset, size, dst, *reader_, [&](size_t c, int64_t limit) {
    const ChunkBytes& chunk = tensor.at[c];
    touched_[chunk.file] = true;
    const os::OpenedFile& file = files_[chunk.file];
    if (!chunk.strides.empty()) {
      reader_->Reset([this, &chunk](int64_t from, int64_t n,
                                    std::byte* out) { return ReadStrided(chunk, from, n, out); },
                     chunk.bytes, limit);
      return;
    }
    reader_->Reset(
        [&file, at = chunk.data_offset](int64_t from, int64_t n, std::byte* out) {
          return file.Pread(at + static_cast<uint64_t>(from), static_cast<uint64_t>(n), out);
        },
        chunk.bytes, limit);
  });
}

// The file offset of element k (row-major order) of a chunk that is not row-major.
uint64_t DcpSource::ElementAt(const ChunkBytes& chunk, int64_t k) {
  int64_t position = 0;
  for (size_t d = chunk.sizes.size(); d-- > 0;) {
    position += k % chunk.sizes[d] * chunk.strides[d];
    k /= chunk.sizes[d];
  }
  return chunk.data_offset + static_cast<uint64_t>(position * chunk.element_bytes);
}

absl::Status DcpSource::ReadStrided(const ChunkBytes& chunk, int64_t from, int64_t n,
                                    std::byte* dst) const {
  const os::OpenedFile& file = files_[chunk.file];
  const int64_t e = chunk.element_bytes;
  const int64_t end = from + n;
  // Part of one element: read it whole, copy the part.
  auto partial = [&](int64_t k, int64_t lo, int64_t hi) -> absl::Status {
    std::byte element[16];
    SHARDKIT_RETURN_IF_ERROR(file.Pread(ElementAt(chunk, k), static_cast<uint64_t>(e), element));
    std::memcpy(dst + (k * e + lo - from), element + lo, static_cast<size_t>(hi - lo));
    return absl::OkStatus();
  };
  int64_t first = from / e;
  if (from % e != 0) {
    SHARDKIT_RETURN_IF_ERROR(partial(first, from % e, std::min(e, end - first * e)));
    ++first;
  }
  const int64_t whole_end = end / e;  // elements [first, whole_end) are wanted whole
  // Runs of elements that follow each other in the file: one pread each.
  int64_t k = first;
  while (k < whole_end) {
    const uint64_t start = ElementAt(chunk, k);
    int64_t count = 1;
    while (k + count < whole_end &&
           ElementAt(chunk, k + count) == start + static_cast<uint64_t>(count * e)) {
      ++count;
    }
    SHARDKIT_RETURN_IF_ERROR(
        file.Pread(start, static_cast<uint64_t>(count * e), dst + (k * e - from)));
    k += count;
  }
  if (end % e != 0 && whole_end >= first) SHARDKIT_RETURN_IF_ERROR(partial(whole_end, 0, end % e));
  return absl::OkStatus();
}

absl::Status DcpSource::CheckUnchanged(size_t t) const {
  for (size_t f : tensors_[t].files) SHARDKIT_RETURN_IF_ERROR(files_[f].CheckUnchanged());
  return absl::OkStatus();
}

int64_t DcpSource::files_read() const {
  return static_cast<int64_t>(std::count(touched_.begin(), touched_.end(), true));
}

}  // namespace shardkit::checkpoint
