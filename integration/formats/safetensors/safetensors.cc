#include "integration/formats/safetensors/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "core/base/check.h"
#include "core/base/quote.h"
#include "core/base/status_macros.h"
#include "core/json/json_reader.h"
#include "core/os/fd.h"
#include "core/os/files.h"
#include "integration/formats/safetensors/internal/header_sax.h"
#include "nlohmann/json.hpp"
#include "specs/fingerprint.h"

namespace shardkit::safetensors {
namespace {

using Json = nlohmann::json;

absl::Status Invalid(std::string_view source, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(std::string(source), ": ", std::string(what)));
}

using os::ErrnoText;

// Parses `text` as JSON, rejecting duplicate keys and deep nesting (specs' strict reader: a
// SAX builder, linear in the input; nlohmann's callback parser rescans the parent object after
// every child object, which is quadratic in the number of tensors).
absl::StatusOr<Json> ParseJson(std::string_view text, std::string_view source) {
  absl::StatusOr<Json> json = json::ParseJson(text);
  if (json.ok()) return json;
  absl::string_view why = json.status().message();
  absl::ConsumePrefix(&why, "invalid JSON: ");
  return Invalid(source, absl::StrCat("header is not valid JSON: ", why));
}

absl::StatusOr<uint64_t> AsUnsigned(const Json& value, std::string_view what) {
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  if (value.is_number_integer() && value.get<int64_t>() >= 0) {
    return static_cast<uint64_t>(value.get<int64_t>());
  }
  return absl::InvalidArgumentError(
      absl::StrCat(std::string(what), ": expected a non-negative integer, got ", value.dump()));
}

// The checks of a tensor's fields against each other, for both paths of ParseHeader.
absl::StatusOr<TensorInfo> CheckEntry(internal::RawEntry raw) {
  const std::string where = absl::StrCat("tensor ", QuoteName(raw.name));
  absl::StatusOr<DType> dtype = DTypeFromSafetensors(raw.dtype);
  if (!dtype.ok()) return Annotate(dtype.status(), where);
  TensorInfo info{std::move(raw.name), *dtype, std::move(raw.shape), raw.begin, raw.end};
  absl::StatusOr<ShapeSize> size = ComputeShapeSize(info.shape, info.dtype);
  if (!size.ok()) return Annotate(size.status(), where);
  if (info.end < info.begin || info.end - info.begin != static_cast<uint64_t>(size->nbytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": data_offsets [", info.begin, ", ", info.end, "] hold ",
                     info.end >= info.begin ? info.end - info.begin : 0, " bytes but shape ",
                     ShapeToString(info.shape), " of ", std::string(SafetensorsName(info.dtype)),
                     " needs ", size->nbytes));
  }
  return info;
}

// A tensor's fields from the DOM, each checked for its type.
absl::StatusOr<internal::RawEntry> ReadEntry(const std::string& name, const Json& entry) {
  if (!entry.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor ", QuoteName(name), ": expected an object"));
  }
  for (const auto& [key, unused] : entry.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", QuoteName(name), ": unknown field ", QuoteName(key)));
    }
  }
  if (!entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets")) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor ", QuoteName(name), ": needs dtype, shape and data_offsets"));
  }
  const Json& dtype = entry["dtype"];
  if (!dtype.is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor ", QuoteName(name), ": dtype must be a string"));
  }
  internal::RawEntry raw{name, dtype.get<std::string>(), {}, 0, 0};
  const Json& shape = entry["shape"];
  const Json& offsets = entry["data_offsets"];
  if (!shape.is_array() || shape.size() > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor ", QuoteName(name), ": shape must be an array of at most 64 sizes"));
  }
  for (const Json& dim : shape) {
    SHARDKIT_ASSIGN_OR_RETURN(uint64_t d,
                              AsUnsigned(dim, absl::StrCat("tensor ", QuoteName(name), " shape")));
    if (d > static_cast<uint64_t>(INT64_MAX)) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", QuoteName(name), ": shape overflows"));
    }
    raw.shape.push_back(static_cast<int64_t>(d));
  }
  if (!offsets.is_array() || offsets.size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor ", QuoteName(name), ": data_offsets must be [begin, end]"));
  }
  std::string what = absl::StrCat("tensor ", QuoteName(name), " data_offsets");
  SHARDKIT_ASSIGN_OR_RETURN(raw.begin, AsUnsigned(offsets[0], what));
  SHARDKIT_ASSIGN_OR_RETURN(raw.end, AsUnsigned(offsets[1], what));
  return raw;
}

absl::StatusOr<std::map<std::string, std::string>> ParseMetadata(const Json& value) {
  if (!value.is_object()) return absl::InvalidArgumentError("__metadata__ must be an object");
  std::map<std::string, std::string> metadata;
  for (const auto& [key, v] : value.items()) {
    if (!v.is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat("__metadata__ ", QuoteName(key), ": values must be strings"));
    }
    metadata[key] = v.get<std::string>();
  }
  return metadata;
}

// Tensors must tile the data region exactly, in offset order (as the reference implementation
// requires): no gap, no overlap, nothing outside it.
absl::Status CheckLayout(std::vector<TensorInfo>& tensors, uint64_t data_size) {
  std::sort(tensors.begin(), tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  uint64_t position = 0;
  for (const TensorInfo& info : tensors) {
    if (info.end > data_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", QuoteName(info.name), ": data_offsets end ", info.end,
                       " lies beyond the data region of ", data_size, " bytes (file truncated?)"));
    }
    if (info.begin != position) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", QuoteName(info.name), ": data starts at ", info.begin,
                       " but the previous tensor ends at ", position,
                       info.begin < position ? " (overlap)" : " (gap)"));
    }
    position = info.end;
  }
  if (position != data_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("data region has ", data_size, " bytes but the tensors cover ", position));
  }
  return absl::OkStatus();
}

absl::Status ReadFully(int fd, uint64_t offset, uint64_t size, void* dst, std::string_view path) {
  const int err = os::PreadFully(fd, dst, static_cast<size_t>(size), offset);
  if (err == os::kNoBytes) return Invalid(path, "file is truncated");
  if (err != 0) {
    return absl::UnavailableError(
        absl::StrCat(std::string(path), ": read failed: ", ErrnoText(err)));
  }
  return absl::OkStatus();
}

// The checks after reading, on entries in name order: the same first error as the DOM path.
absl::StatusOr<Header> CheckRawHeader(internal::RawHeader raw, uint64_t data_size,
                                      std::string_view source) {
  Header header;
  header.metadata = std::move(raw.metadata);
  header.tensors.reserve(raw.tensors.size());
  for (internal::RawEntry& entry : raw.tensors) {
    absl::StatusOr<TensorInfo> info = CheckEntry(std::move(entry));
    if (!info.ok()) return Annotate(info.status(), source);
    header.tensors.push_back(*std::move(info));
  }
  SHARDKIT_RETURN_IF_ERROR(Annotate(CheckLayout(header.tensors, data_size), source));
  return header;
}

// A header length as the file's first 8 bytes hold it (little-endian).
std::string LengthBytes(uint64_t length) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(length >> (8 * i));
  return bytes;
}

// Not a safetensors file: "PATH: not a safetensors file (WHY)".
absl::Status Foreign(std::string_view path, const std::string& why) {
  return Invalid(path, absl::StrCat("not a safetensors file (", why, ")"));
}

// The header length a file of `file_size` bytes starts with, once its first bytes show it is a
// safetensors file at all: at least an 8-byte length and "{}", and the header begins with '{' (as
// the format requires). A header length beyond the end of such a file is a truncated file, unless
// it is also beyond the limit: no writer makes a header that long, so the bytes are not a length.
absl::StatusOr<uint64_t> ReadHeaderLength(int fd, uint64_t file_size, std::string_view path) {
  constexpr uint64_t kSmallest = 8 + 2;  // the length and "{}"
  if (file_size < kSmallest) {
    return Foreign(path, absl::StrCat(file_size, " bytes; the smallest holds ", kSmallest,
                                      ": an 8-byte header length and the header \"{}\""));
  }
  unsigned char head[9];
  SHARDKIT_RETURN_IF_ERROR(ReadFully(fd, 0, sizeof(head), head, path));
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = header_size << 8 | head[i];
  if (head[8] != '{') {
    return Foreign(path, absl::StrFormat("its 8-byte header length is followed by byte 0x%02x, "
                                         "not the '{' that starts the JSON header",
                                         head[8]));
  }
  if (header_size > file_size - 8 && header_size > kMaxHeaderBytes) {
    return Foreign(path, absl::StrCat("its first 8 bytes give a header length of ", header_size,
                                      ", more than the file's ", file_size, " bytes"));
  }
  if (header_size > kMaxHeaderBytes) {
    return Invalid(path, absl::StrCat("header length ", header_size, " exceeds the limit of ",
                                      kMaxHeaderBytes, " bytes"));
  }
  if (header_size > file_size - 8) {
    return Invalid(path, absl::StrCat("file is truncated: header length ", header_size,
                                      " but only ", file_size - 8, " bytes follow"));
  }
  return header_size;
}

}  // namespace

// The DOM path reads what the fast path gave up on, and words the error.
absl::StatusOr<Header> ParseHeader(std::string_view json, uint64_t data_size,
                                   std::string_view source) {
  if (std::optional<internal::RawHeader> raw = internal::ParseWellFormedHeader(json)) {
    return CheckRawHeader(*std::move(raw), data_size, source);
  }
  SHARDKIT_ASSIGN_OR_RETURN(Json parsed, ParseJson(json, source));
  if (!parsed.is_object()) return Invalid(source, "header must be a JSON object");
  internal::RawHeader raw;
  for (const auto& [key, value] : parsed.items()) {  // in name order
    if (key == "__metadata__") {
      absl::StatusOr<std::map<std::string, std::string>> metadata = ParseMetadata(value);
      if (!metadata.ok()) return Annotate(metadata.status(), source);
      raw.metadata = *std::move(metadata);
      continue;
    }
    absl::StatusOr<internal::RawEntry> entry = ReadEntry(key, value);
    if (!entry.ok()) return Annotate(entry.status(), source);
    raw.tensors.push_back(*std::move(entry));
  }
  return CheckRawHeader(std::move(raw), data_size, source);
}

std::string SerializeHeader(const std::vector<TensorInfo>& tensors,
                            const std::map<std::string, std::string>& metadata) {
  Json json = Json::object();  // std::map-backed: keys come out sorted
  if (!metadata.empty()) json["__metadata__"] = metadata;
  for (const TensorInfo& info : tensors) {
    json[info.name] = {{"dtype", SafetensorsName(info.dtype)},
                       {"shape", info.shape},
                       {"data_offsets", {info.begin, info.end}}};
  }
  std::string text = json.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

std::string SerializePrefix(const std::vector<TensorInfo>& tensors,
                            const std::map<std::string, std::string>& metadata) {
  const std::string header = SerializeHeader(tensors, metadata);
  return LengthBytes(header.size()) + header;
}

absl::StatusOr<Reader> Reader::Open(const std::string& path) {
  Reader reader;
  SHARDKIT_ASSIGN_OR_RETURN(reader.file_, os::OpenedFile::Open(path));
  const int fd = reader.file_.fd();
  const uint64_t file_size = reader.file_.size();
  SHARDKIT_ASSIGN_OR_RETURN(const uint64_t header_size, ReadHeaderLength(fd, file_size, path));
  std::string json(header_size, '\0');
  SHARDKIT_RETURN_IF_ERROR(ReadFully(fd, 8, header_size, json.data(), path));
  SHARDKIT_ASSIGN_OR_RETURN(reader.header_, ParseHeader(json, file_size - 8 - header_size, path));
  reader.header_.data_start = 8 + header_size;
  const std::string header_bytes = LengthBytes(header_size) + json;
  reader.identity_ = FileIdentity{file_size, specs::Fingerprint(header_bytes)};
  for (size_t i = 0; i < reader.header_.tensors.size(); ++i) {
    reader.by_name_[reader.header_.tensors[i].name] = i;
  }
  return reader;
}

absl::Status Reader::CheckUnchanged() const { return file_.CheckUnchanged(); }

absl::StatusOr<const TensorInfo*> Reader::Find(std::string_view name) const {
  if (auto it = by_name_.find(absl::string_view(name.data(), name.size())); it != by_name_.end()) {
    return &header_.tensors[it->second];
  }
  return absl::NotFoundError(
      absl::StrCat(file_.path(), ": no tensor ", QuoteName(std::string(name))));
}

absl::Status Reader::ReadBytes(const TensorInfo& info, uint64_t offset, uint64_t size,
                               void* dst) const {
  SHARDKIT_CHECK(offset <= info.end - info.begin && size <= info.end - info.begin - offset)
      << "ReadBytes outside tensor " << info.name;
  return file_.Pread(header_.data_start + info.begin + offset, size, dst);
}

absl::StatusOr<Tensor> Reader::ReadTensor(std::string_view name) const {
  SHARDKIT_ASSIGN_OR_RETURN(const TensorInfo* info, Find(name));
  SHARDKIT_ASSIGN_OR_RETURN(Tensor tensor, Tensor::Empty(info->shape, info->dtype));
  SHARDKIT_RETURN_IF_ERROR(ReadBytes(*info, 0, info->end - info->begin, tensor.data()));
  return tensor;
}

namespace {

// Assigns offsets in name order (the order Writer writes data in).
std::vector<TensorInfo> LayOut(std::vector<TensorInfo> tensors) {
  std::sort(tensors.begin(), tensors.end(),
            [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });
  uint64_t offset = 0;
  for (TensorInfo& info : tensors) {
    // Shapes come from Tensors or parsed headers, whose sizes are known to fit.
    const uint64_t nbytes = static_cast<uint64_t>(ComputeShapeSize(info.shape, info.dtype)->nbytes);
    info.begin = offset;
    info.end = offset + nbytes;
    offset += nbytes;
  }
  return tensors;
}

}  // namespace

Writer::Writer(os::AtomicFile file, std::vector<TensorInfo> tensors)
    : file_(std::move(file)), tensors_(std::move(tensors)) {}

absl::StatusOr<FileLayout> PlanFile(const std::string& path, std::vector<TensorInfo> tensors,
                                    const std::map<std::string, std::string>& metadata) {
  for (const TensorInfo& info : tensors) {
    SHARDKIT_RETURN_IF_ERROR(Annotate(ComputeShapeSize(info.shape, info.dtype).status(), path));
  }
  tensors = LayOut(std::move(tensors));
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].name == "__metadata__") {
      return Invalid(path, "cannot write a tensor named \"__metadata__\" (reserved)");
    }
    if (i > 0 && tensors[i - 1].name == tensors[i].name) {
      return Invalid(path, absl::StrCat("duplicate tensor name ", QuoteName(tensors[i].name)));
    }
  }
  FileLayout layout;
  layout.prefix = SerializePrefix(tensors, metadata);
  for (const TensorInfo& info : tensors) layout.data_size = std::max(layout.data_size, info.end);
  layout.tensors = std::move(tensors);
  return layout;
}

absl::StatusOr<Writer> Writer::Create(const std::string& path, std::vector<TensorInfo> tensors,
                                      const std::map<std::string, std::string>& metadata) {
  SHARDKIT_ASSIGN_OR_RETURN(FileLayout layout, PlanFile(path, std::move(tensors), metadata));
  SHARDKIT_ASSIGN_OR_RETURN(os::AtomicFile file, os::AtomicFile::Create(path));
  SHARDKIT_RETURN_IF_ERROR(file.Write(layout.prefix.data(), layout.prefix.size()));
  return Writer(std::move(file), std::move(layout.tensors));
}

absl::Status Writer::Append(const Tensor& tensor) {
  if (next_ >= tensors_.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat(file_.path(), ": every tensor has been written already"));
  }
  const TensorInfo& info = tensors_[next_];
  if (tensor.is_meta() || tensor.dtype() != info.dtype || tensor.shape() != info.shape) {
    return absl::FailedPreconditionError(
        absl::StrCat(file_.path(), ": tensor ", QuoteName(info.name), " expects ",
                     std::string(SafetensorsName(info.dtype)), ShapeToString(info.shape), ", got ",
                     tensor.DebugString()));
  }
  SHARDKIT_ASSIGN_OR_RETURN(Tensor packed, tensor.Contiguous());
  SHARDKIT_RETURN_IF_ERROR(file_.Write(packed.data(), static_cast<size_t>(packed.nbytes())));
  ++next_;
  return absl::OkStatus();
}

absl::Status Writer::Commit() {
  if (next_ != tensors_.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat(file_.path(), ": ", tensors_.size() - next_, " tensors were never written"));
  }
  return file_.Commit();
}

absl::Status WriteFile(const std::string& path,
                       const std::vector<std::pair<std::string, const Tensor*>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<TensorInfo> infos;
  std::map<std::string, const Tensor*> by_name;
  for (const auto& [name, tensor] : tensors) {
    if (tensor->is_meta()) {
      return Invalid(path, absl::StrCat("cannot write tensor ", QuoteName(name), " (",
                                        tensor->DebugString(), ")"));
    }
    infos.push_back({name, tensor->dtype(), tensor->shape(), 0, 0});
    by_name[name] = tensor;
  }
  SHARDKIT_ASSIGN_OR_RETURN(Writer writer, Writer::Create(path, std::move(infos), metadata));
  for (const TensorInfo& info : writer.tensors()) {
    SHARDKIT_RETURN_IF_ERROR(writer.Append(*by_name[info.name]));
  }
  return writer.Commit();
}

}  // namespace shardkit::safetensors
